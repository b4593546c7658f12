package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultContext is the docker context that names no stored endpoint: DOCKER_HOST, or
// DefaultHost without it (the docker CLI's "default").
const DefaultContext = "default"

// Endpoint is the daemon that the docker CLI of an environment talks to, and so the one
// docker compose changes: the Engine API client must read that daemon and no other.
type Endpoint struct {
	// Host is the daemon's address, normalised: "unix:///var/run/docker.sock" or
	// "tcp://127.0.0.1:2375".
	Host string
	// Context is the docker context that named Host: DefaultContext when DOCKER_HOST
	// is set or no context is selected.
	Context string
	// Source says what selected the endpoint, for logs and errors: "DOCKER_HOST",
	// "DOCKER_CONTEXT", "currentContext of /root/.docker/config.json" or "no
	// DOCKER_HOST and no docker context".
	Source string

	network string // "unix" or "tcp"
	addr    string // the socket path or host:port
}

// Local reports whether the daemon is reached on a unix socket, and so runs on this
// machine: its data root is a directory here.
func (e Endpoint) Local() bool { return e.network == "unix" }

// Resolve finds the daemon in the docker environment env ("K=V", as deployd.DockerEnv
// returns it; the last of a repeated name wins), the way the docker CLI does (docker/cli,
// cli/command: resolveContextName), reading no process environment:
//
//  1. DOCKER_HOST, when it is not empty (the default context);
//  2. else DOCKER_CONTEXT, when it is not empty;
//  3. else the currentContext of config.json in the CLI's configuration directory:
//     DOCKER_CONFIG, or HOME/.docker without it (with neither, there is no
//     configuration file to read: the docker CLI would look the home directory up in
//     the user database, this function does not);
//  4. else the default context.
//
// The default context is DOCKER_HOST, or DefaultHost, with TLS when
// DOCKER_TLS_VERIFY or DOCKER_CERT_PATH is set. Any other context is read from
// contexts/meta/<hex sha256 of its name>/meta.json in the configuration directory: its
// Endpoints.docker.Host, with TLS when its SkipTLSVerify is true or it has TLS
// material (contexts/tls/<hex sha256>/docker/).
//
// An endpoint that exists but that this client does not speak (ssh://, npipe://,
// fd://, TLS) matches ErrUnsupported: read through the docker CLI, which does. A
// malformed DOCKER_HOST, a context that does not exist, or a configuration file or
// context that does not parse is an *Error that names the variable or the file; the
// docker CLI fails on them too, each in its own words.
func Resolve(env []string) (Endpoint, error) {
	vals := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vals[k] = v
		}
	}
	envTLS := vals["DOCKER_TLS_VERIFY"] != "" || vals["DOCKER_CERT_PATH"] != ""
	if h := vals["DOCKER_HOST"]; h != "" {
		return parseHost(h, "DOCKER_HOST", DefaultContext, "DOCKER_HOST", envTLS)
	}
	name, source := vals["DOCKER_CONTEXT"], "DOCKER_CONTEXT"
	dir := configDir(vals)
	if name == "" && dir != "" {
		current, path, err := currentContext(dir)
		if err != nil {
			return Endpoint{}, err
		}
		name, source = current, "currentContext of "+path
	}
	if name == "" || name == DefaultContext {
		if name == "" {
			source = "no DOCKER_HOST and no docker context"
		}
		return parseHost(DefaultHost, "the default host", DefaultContext, source, envTLS)
	}
	return contextEndpoint(dir, name, source)
}

// configDir is the docker CLI's configuration directory: DOCKER_CONFIG, else
// HOME/.docker, else "" (none known).
func configDir(vals map[string]string) string {
	if d := vals["DOCKER_CONFIG"]; d != "" {
		return d
	}
	if h := vals["HOME"]; h != "" {
		return filepath.Join(h, ".docker")
	}
	return ""
}

// currentContext reads the currentContext of dir/config.json: "" when the file or
// the field is missing.
func currentContext(dir string) (name, path string, err error) {
	path = filepath.Join(dir, "config.json")
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", path, nil
	}
	if err != nil {
		return "", path, &Error{Op: "endpoint", Err: fmt.Errorf("reading the docker CLI's configuration: %w", err)}
	}
	var cfg struct {
		CurrentContext string `json:"currentContext"`
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return "", path, nil // the CLI reads an empty file as no configuration
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return "", path, &Error{Op: "endpoint", Err: fmt.Errorf("the docker CLI's configuration %s: %w", path, jsonErr(err))}
	}
	return cfg.CurrentContext, path, nil
}

// contextDir is the directory name of a context in the CLI's context store: the hex
// sha256 of its name (docker/cli, cli/context/store: contextdirOf).
func contextDir(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:])
}

// contextEndpoint reads the docker endpoint of the stored context name.
func contextEndpoint(dir, name, source string) (Endpoint, error) {
	fail := func(format string, args ...any) (Endpoint, error) {
		return Endpoint{}, &Error{Op: "endpoint", Err: fmt.Errorf("docker context %q (%s): %s", name, source, fmt.Sprintf(format, args...))}
	}
	if dir == "" {
		return fail("no docker CLI configuration directory to find it in: neither DOCKER_CONFIG nor HOME is set")
	}
	id := contextDir(name)
	metaPath := filepath.Join(dir, "contexts", "meta", id, "meta.json")
	data, err := os.ReadFile(metaPath)
	if errors.Is(err, fs.ErrNotExist) {
		return fail("not found: there is no %s (docker context ls lists the contexts)", metaPath)
	}
	if err != nil {
		return fail("%v", err)
	}
	var meta struct {
		Endpoints map[string]json.RawMessage `json:"Endpoints"`
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		return fail("%s: %v", metaPath, jsonErr(err))
	}
	raw, ok := meta.Endpoints["docker"]
	if !ok {
		return fail("%s has no docker endpoint (Endpoints.docker)", metaPath)
	}
	var ep struct {
		Host          string `json:"Host"`
		SkipTLSVerify bool   `json:"SkipTLSVerify"`
	}
	if err := json.Unmarshal(raw, &ep); err != nil {
		return fail("%s: Endpoints.docker: %v", metaPath, jsonErr(err))
	}
	if ep.Host == "" {
		return fail("%s has no Endpoints.docker.Host", metaPath)
	}
	tlsDir := filepath.Join(dir, "contexts", "tls", id, "docker")
	entries, err := os.ReadDir(tlsDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail("%v", err)
	}
	label := fmt.Sprintf("docker context %q's host", name)
	return parseHost(ep.Host, label, name, source, ep.SkipTLSVerify || len(entries) > 0)
}

// parseHost reads a docker host URL. label names where it came from in errors
// ("DOCKER_HOST"); tls says the CLI would speak TLS to it.
func parseHost(raw, label, context, source string, tls bool) (Endpoint, error) {
	unsupported := func(host, why string) error {
		return &Error{Op: "endpoint", Host: host, Err: fmt.Errorf("%w: %s", ErrUnsupported, why)}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return Endpoint{}, &Error{Op: "endpoint", Err: fmt.Errorf("%s is not a URL such as unix:///var/run/docker.sock or tcp://host:2375", label)}
	}
	shown := u.Redacted()
	e := Endpoint{Context: context, Source: source}
	switch u.Scheme {
	case "unix":
		p := u.Path
		if u.Host != "" || !strings.HasPrefix(p, "/") || u.RawQuery != "" {
			return Endpoint{}, &Error{Op: "endpoint", Host: shown, Err: fmt.Errorf("%s unix:// needs an absolute socket path, e.g. unix:///var/run/docker.sock", label)}
		}
		e.network, e.addr, e.Host = "unix", p, "unix://"+p
		return e, nil
	case "tcp":
		if tls {
			why := "TLS to the daemon (DOCKER_TLS_VERIFY or DOCKER_CERT_PATH is set)"
			if context != DefaultContext {
				why = fmt.Sprintf("TLS to the daemon (docker context %q has TLS material or SkipTLSVerify)", context)
			}
			return Endpoint{}, unsupported(shown, why)
		}
		if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Hostname() == "" {
			return Endpoint{}, &Error{Op: "endpoint", Host: shown, Err: fmt.Errorf("%s tcp:// takes a host and a port only, e.g. tcp://127.0.0.1:2375", label)}
		}
		port := u.Port()
		if port == "" {
			port = "2375"
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return Endpoint{}, &Error{Op: "endpoint", Host: shown, Err: fmt.Errorf("%s tcp:// has no valid port", label)}
		}
		e.network, e.addr = "tcp", net.JoinHostPort(u.Hostname(), port)
		e.Host = "tcp://" + e.addr
		return e, nil
	case "ssh", "npipe", "fd":
		return Endpoint{}, unsupported(shown, label+" "+u.Scheme+":// is not spoken here")
	default:
		return Endpoint{}, unsupported(shown, label+" scheme "+u.Scheme+":// is not one of unix, tcp")
	}
}
