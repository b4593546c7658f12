package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dockerConfig is a docker CLI configuration directory for a test: config.json, stored
// contexts and their TLS material, laid out as the docker CLI writes them.
type dockerConfig struct {
	config   string            // config.json; "" for none
	contexts map[string]string // context name → meta.json
	tls      []string          // contexts with a docker TLS directory (ca.pem)
}

// write lays c out under dir.
func (c dockerConfig) write(t *testing.T, dir string) {
	t.Helper()
	put := func(path, data string) {
		t.Helper()
		noErr(t, os.MkdirAll(filepath.Dir(path), 0o700))
		noErr(t, os.WriteFile(path, []byte(data), 0o600))
	}
	if c.config != "" {
		put(filepath.Join(dir, "config.json"), c.config)
	}
	for name, meta := range c.contexts {
		sum := sha256.Sum256([]byte(name))
		put(filepath.Join(dir, "contexts", "meta", hex.EncodeToString(sum[:]), "meta.json"), meta)
	}
	for _, name := range c.tls {
		sum := sha256.Sum256([]byte(name))
		put(filepath.Join(dir, "contexts", "tls", hex.EncodeToString(sum[:]), "docker", "ca.pem"), "-----BEGIN CERTIFICATE-----\n")
	}
}

// meta is a context's meta.json as `docker context create NAME --docker host=HOST` writes it.
func meta(name, host string) string {
	return `{"Name":"` + name + `","Metadata":{"Description":""},"Endpoints":{"docker":{"Host":"` + host + `","SkipTLSVerify":false}}}`
}

// TestResolve: the endpoint is the one the docker CLI would talk to, case by case of
// its resolution (docker/cli resolveContextName and the context store), and New's
// client is of it (or New fails as Resolve does). In env,
// "$CONFIG" is the configuration directory of the case and "$HOME" a home directory
// whose .docker is that directory.
func TestResolve(t *testing.T) {
	rootless := meta("rootless", "unix:///run/user/1000/docker.sock")
	colima := meta("colima", "unix:///Users/me/.colima/default/docker.sock")
	tests := []struct {
		name        string
		env         []string
		cfg         dockerConfig
		host        string // the endpoint's Host; "" when Resolve fails
		context     string // the endpoint's Context; "" for DefaultContext
		source      string // the endpoint's Source holds this
		unsupported bool   // the failure matches ErrUnsupported
		says        string // the failure's text holds this
	}{
		{name: "nothing: the default socket", env: nil, host: DefaultHost, source: "no DOCKER_HOST and no docker context"},
		{name: "DOCKER_HOST", env: []string{"DOCKER_HOST=unix:///x.sock"}, host: "unix:///x.sock", source: "DOCKER_HOST"},
		{name: "nil env", env: nil, host: DefaultHost},
		{name: "no DOCKER_HOST, a home without .docker", env: []string{"PATH=/usr/bin", "HOME=$HOME"}, host: DefaultHost},
		{name: "empty DOCKER_HOST", env: []string{"DOCKER_HOST="}, host: DefaultHost},
		{name: "unix", env: []string{"DOCKER_HOST=unix:///run/user/1000/docker.sock"}, host: "unix:///run/user/1000/docker.sock"},
		{name: "last DOCKER_HOST wins", env: []string{"DOCKER_HOST=ssh://a", "DOCKER_HOST=unix:///x.sock"}, host: "unix:///x.sock"},
		{name: "tcp", env: []string{"DOCKER_HOST=tcp://127.0.0.1:2375"}, host: "tcp://127.0.0.1:2375"},
		{name: "tcp default port", env: []string{"DOCKER_HOST=tcp://dockerd.internal"}, host: "tcp://dockerd.internal:2375"},
		{name: "tcp ipv6", env: []string{"DOCKER_HOST=tcp://[::1]:2375/"}, host: "tcp://[::1]:2375"},
		{name: "DOCKER_CONTEXT=default", env: []string{"DOCKER_CONTEXT=default"}, host: DefaultHost},
		{name: "empty TLS variables", env: []string{"DOCKER_HOST=tcp://h:1", "DOCKER_TLS_VERIFY=", "DOCKER_CERT_PATH="}, host: "tcp://h:1"},
		{name: "API version ignored", env: []string{"DOCKER_API_VERSION=1.41"}, host: DefaultHost},
		{name: "DOCKER_HOST beats DOCKER_CONTEXT", env: []string{"DOCKER_HOST=unix:///x.sock", "DOCKER_CONTEXT=rootless"}, host: "unix:///x.sock"},
		{name: "DOCKER_HOST beats DOCKER_CONTEXT and currentContext",
			env:  []string{"DOCKER_CONFIG=$CONFIG", "DOCKER_CONTEXT=rootless", "DOCKER_HOST=tcp://10.0.0.1:2375"},
			cfg:  dockerConfig{config: `{"currentContext":"colima"}`, contexts: map[string]string{"rootless": rootless, "colima": colima}},
			host: "tcp://10.0.0.1:2375", source: "DOCKER_HOST"},
		{name: "an empty DOCKER_HOST does not count",
			env:  []string{"DOCKER_HOST=", "DOCKER_CONTEXT=rootless", "DOCKER_CONFIG=$CONFIG"},
			cfg:  dockerConfig{contexts: map[string]string{"rootless": rootless}},
			host: "unix:///run/user/1000/docker.sock", context: "rootless", source: "DOCKER_CONTEXT"},
		{name: "DOCKER_CONTEXT beats currentContext",
			env:  []string{"DOCKER_CONFIG=$CONFIG", "DOCKER_CONTEXT=rootless"},
			cfg:  dockerConfig{config: `{"currentContext":"colima"}`, contexts: map[string]string{"rootless": rootless, "colima": colima}},
			host: "unix:///run/user/1000/docker.sock", context: "rootless", source: "DOCKER_CONTEXT"},
		{name: "DOCKER_CONTEXT=default beats currentContext",
			env:  []string{"DOCKER_CONFIG=$CONFIG", "DOCKER_CONTEXT=default"},
			cfg:  dockerConfig{config: `{"currentContext":"colima"}`, contexts: map[string]string{"colima": colima}},
			host: DefaultHost, source: "DOCKER_CONTEXT"},
		{name: "currentContext of $DOCKER_CONFIG/config.json (docker context use)",
			env:  []string{"DOCKER_CONFIG=$CONFIG", "HOME=/nonexistent"},
			cfg:  dockerConfig{config: `{"auths":{},"currentContext":"colima"}`, contexts: map[string]string{"colima": colima}},
			host: "unix:///Users/me/.colima/default/docker.sock", context: "colima", source: "currentContext of $CONFIG/config.json"},
		{name: "currentContext of ~/.docker/config.json without DOCKER_CONFIG",
			env:  []string{"HOME=$HOME"},
			cfg:  dockerConfig{config: `{"currentContext":"rootless"}`, contexts: map[string]string{"rootless": rootless}},
			host: "unix:///run/user/1000/docker.sock", context: "rootless", source: "currentContext of $CONFIG/config.json"},
		{name: "currentContext default", env: []string{"DOCKER_CONFIG=$CONFIG"},
			cfg:  dockerConfig{config: `{"currentContext":"default"}`},
			host: DefaultHost, source: "currentContext"},
		{name: "config.json without currentContext", env: []string{"DOCKER_CONFIG=$CONFIG"},
			cfg:  dockerConfig{config: `{"auths":{"registry.example":{}}}`},
			host: DefaultHost},
		{name: "an empty config.json", env: []string{"DOCKER_CONFIG=$CONFIG"}, cfg: dockerConfig{config: "\n"}, host: DefaultHost},
		{name: "no config.json", env: []string{"DOCKER_CONFIG=$CONFIG"}, host: DefaultHost},
		{name: "the default context keeps the environment's TLS", env: []string{"DOCKER_CONFIG=$CONFIG", "DOCKER_TLS_VERIFY=1"},
			cfg:  dockerConfig{config: `{"currentContext":"default"}`},
			host: DefaultHost}, // a unix socket: TLS does not apply
		{name: "a context over plain tcp", env: []string{"DOCKER_CONTEXT=lan", "DOCKER_CONFIG=$CONFIG", "DOCKER_CERT_PATH=/ignored"},
			cfg:  dockerConfig{contexts: map[string]string{"lan": meta("lan", "tcp://192.168.1.5")}},
			host: "tcp://192.168.1.5:2375", context: "lan"},

		{name: "ssh", env: []string{"DOCKER_HOST=ssh://deploy@box"}, unsupported: true, says: "ssh://"},
		{name: "npipe", env: []string{"DOCKER_HOST=npipe:////./pipe/docker_engine"}, unsupported: true, says: "npipe://"},
		{name: "fd", env: []string{"DOCKER_HOST=fd://"}, unsupported: true, says: "fd://"},
		{name: "https", env: []string{"DOCKER_HOST=https://h:2376"}, unsupported: true, says: "https://"},
		{name: "TLS verify", env: []string{"DOCKER_HOST=tcp://h:2376", "DOCKER_TLS_VERIFY=1"}, unsupported: true, says: "TLS"},
		{name: "cert path", env: []string{"DOCKER_HOST=tcp://h:2376", "DOCKER_CERT_PATH=/etc/docker/certs"}, unsupported: true, says: "TLS"},
		{name: "context without a configuration directory", env: []string{"DOCKER_CONTEXT=prod"}, says: "neither DOCKER_CONFIG nor HOME"},
		{name: "relative unix", env: []string{"DOCKER_HOST=unix://docker.sock"}, says: "absolute socket path"},
		{name: "unix without path", env: []string{"DOCKER_HOST=unix://"}, says: "absolute socket path"},
		{name: "no scheme", env: []string{"DOCKER_HOST=/var/run/docker.sock"}, says: "not a URL"},
		{name: "tcp with path", env: []string{"DOCKER_HOST=tcp://h:2375/api"}, says: "host and a port only"},
		{name: "tcp with user", env: []string{"DOCKER_HOST=tcp://me:pw@h:2375"}, says: "host and a port only"},
		{name: "tcp bad port", env: []string{"DOCKER_HOST=tcp://h:99999"}, says: "no valid port"},
		{name: "tcp no host", env: []string{"DOCKER_HOST=tcp://:2375"}, says: "host and a port only"},
		{name: "a context over ssh", env: []string{"DOCKER_CONTEXT=remote", "DOCKER_CONFIG=$CONFIG"},
			cfg:         dockerConfig{contexts: map[string]string{"remote": meta("remote", "ssh://deploy@box")}},
			unsupported: true, says: `docker context "remote"'s host ssh://`},
		{name: "a context with TLS material", env: []string{"DOCKER_CONTEXT=secure", "DOCKER_CONFIG=$CONFIG"},
			cfg:         dockerConfig{contexts: map[string]string{"secure": meta("secure", "tcp://h:2376")}, tls: []string{"secure"}},
			unsupported: true, says: `docker context "secure" has TLS material`},
		{name: "a context with SkipTLSVerify", env: []string{"DOCKER_CONTEXT=insecure", "DOCKER_CONFIG=$CONFIG"},
			cfg:         dockerConfig{contexts: map[string]string{"insecure": `{"Name":"insecure","Endpoints":{"docker":{"Host":"tcp://h:2376","SkipTLSVerify":true}}}`}},
			unsupported: true, says: "TLS"},
		{name: "a context that does not exist", env: []string{"DOCKER_CONTEXT=gone", "DOCKER_CONFIG=$CONFIG"},
			says: `docker context "gone" (DOCKER_CONTEXT): not found: there is no $CONFIG/contexts/meta/`},
		{name: "a currentContext that does not exist", env: []string{"DOCKER_CONFIG=$CONFIG"},
			cfg:  dockerConfig{config: `{"currentContext":"gone"}`},
			says: `docker context "gone" (currentContext of $CONFIG/config.json): not found`},
		{name: "a config.json that does not parse", env: []string{"DOCKER_CONFIG=$CONFIG"},
			cfg:  dockerConfig{config: `{"currentContext":`},
			says: "the docker CLI's configuration $CONFIG/config.json: the JSON ends early"},
		{name: "a currentContext that is not a string", env: []string{"DOCKER_CONFIG=$CONFIG"},
			cfg:  dockerConfig{config: `{"currentContext":7}`},
			says: `field "currentContext" is a JSON number, want string`},
		{name: "a meta.json that does not parse", env: []string{"DOCKER_CONTEXT=bad", "DOCKER_CONFIG=$CONFIG"},
			cfg:  dockerConfig{contexts: map[string]string{"bad": "{"}},
			says: `docker context "bad" (DOCKER_CONTEXT): $CONFIG/contexts/meta/`},
		{name: "a context without a docker endpoint", env: []string{"DOCKER_CONTEXT=k8s", "DOCKER_CONFIG=$CONFIG"},
			cfg:  dockerConfig{contexts: map[string]string{"k8s": `{"Name":"k8s","Endpoints":{"kubernetes":{}}}`}},
			says: "has no docker endpoint (Endpoints.docker)"},
		{name: "a context without a host", env: []string{"DOCKER_CONTEXT=empty", "DOCKER_CONFIG=$CONFIG"},
			cfg:  dockerConfig{contexts: map[string]string{"empty": `{"Name":"empty","Endpoints":{"docker":{"Host":""}}}`}},
			says: "has no Endpoints.docker.Host"},
		{name: "a context whose host is not a URL", env: []string{"DOCKER_CONTEXT=odd", "DOCKER_CONFIG=$CONFIG"},
			cfg:  dockerConfig{contexts: map[string]string{"odd": meta("odd", "/var/run/docker.sock")}},
			says: `docker context "odd"'s host is not a URL`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			cfgDir := filepath.Join(home, ".docker")
			tt.cfg.write(t, cfgDir)
			subst := strings.NewReplacer("$CONFIG", cfgDir, "$HOME", home)
			var env []string
			for _, kv := range tt.env {
				env = append(env, subst.Replace(kv))
			}
			ep, err := Resolve(env)
			if tt.context == "" {
				tt.context = DefaultContext
			}
			if tt.host != "" {
				if err != nil {
					t.Fatalf("Resolve: %v", err)
				}
				if ep.Host != tt.host || ep.Context != tt.context {
					t.Fatalf("Resolve = host %q context %q, want host %q context %q", ep.Host, ep.Context, tt.host, tt.context)
				}
				if !strings.Contains(ep.Source, subst.Replace(tt.source)) {
					t.Fatalf("Source %q does not say %q", ep.Source, subst.Replace(tt.source))
				}
				c, err := New(env, Options{})
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				defer func() { _ = c.Close() }()
				if c.Host() != tt.host || c.Endpoint() != ep {
					t.Fatalf("New's client is of %+v, Resolve gave %+v", c.Endpoint(), ep)
				}
				return
			}
			if err == nil {
				t.Fatalf("Resolve gave %+v, want an error", ep)
			}
			if got := errors.Is(err, ErrUnsupported); got != tt.unsupported {
				t.Fatalf("errors.Is(err, ErrUnsupported) = %v, want %v: %v", got, tt.unsupported, err)
			}
			var e *Error
			if !errors.As(err, &e) || e.Op != "endpoint" {
				t.Fatalf("want an *Error of op endpoint, got %#v", err)
			}
			if want := subst.Replace(tt.says); !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "pw@") {
				t.Fatalf("error %q does not say %q, or shows the password of DOCKER_HOST", err, want)
			}
			if _, nerr := New(env, Options{}); nerr == nil || nerr.Error() != err.Error() {
				t.Fatalf("New's error %v is not Resolve's %v", nerr, err)
			}
		})
	}
}

// TestResolveDockerDesktop: the context store as Docker Desktop on Linux writes it,
// with the directory name taken from a real ~/.docker (not computed here): the hex
// sha256 of "desktop-linux".
func TestResolveDockerDesktop(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, ".docker", "contexts", "meta", "fe9c6bd7a66301f49ca9b6a70b217107cd1284598bfc254700c989b916da791e")
	noErr(t, os.MkdirAll(dir, 0o700))
	sock := filepath.Join(home, ".docker", "desktop", "docker.sock")
	metaJSON := `{"Name":"desktop-linux","Metadata":{"Description":"Docker Desktop"},"Endpoints":{"docker":{"Host":"unix://` + sock + `","SkipTLSVerify":false}}}`
	noErr(t, os.WriteFile(filepath.Join(dir, "meta.json"), []byte(metaJSON), 0o600))
	cfg := `{"auths":{},"credsStore":"desktop","currentContext":"desktop-linux"}`
	noErr(t, os.WriteFile(filepath.Join(home, ".docker", "config.json"), []byte(cfg), 0o600))
	ep, err := Resolve([]string{"PATH=/usr/bin", "HOME=" + home})
	noErr(t, err)
	if ep.Host != "unix://"+sock || ep.Context != "desktop-linux" {
		t.Fatalf("Resolve = %+v, want Docker Desktop's socket %s", ep, sock)
	}
}

func TestNewOptions(t *testing.T) {
	if _, err := New(nil, Options{Timeout: -1}); err == nil {
		t.Fatal("a negative Timeout was accepted")
	}
	if _, err := New(nil, Options{MaxBody: -1}); err == nil {
		t.Fatal("a negative MaxBody was accepted")
	}
	c, err := New(nil, Options{})
	noErr(t, err)
	if c.timeout != DefaultTimeout || c.maxBody != DefaultMaxBody || c.log == nil {
		t.Fatalf("zero Options: timeout %v, max body %d, logger %v; want the defaults", c.timeout, c.maxBody, c.log)
	}
}
