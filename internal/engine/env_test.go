package engine

import (
	"errors"
	"strings"
	"testing"
)

func TestNewEnv(t *testing.T) {
	// A home of the test's own, without a .docker: the machine's real one (root's,
	// unreadable to another user; or one that names a context) is not the test's input.
	home := t.TempDir()
	tests := []struct {
		name        string
		env         []string
		host        string // want Host(); "" when New fails
		unsupported bool   // the failure matches ErrUnsupported
		says        string // the failure's text holds this
	}{
		{name: "no DOCKER_HOST", env: []string{"PATH=/usr/bin", "HOME=" + home}, host: DefaultHost},
		{name: "empty DOCKER_HOST", env: []string{"DOCKER_HOST="}, host: DefaultHost},
		{name: "nil env", env: nil, host: DefaultHost},
		{name: "unix", env: []string{"DOCKER_HOST=unix:///run/user/1000/docker.sock"}, host: "unix:///run/user/1000/docker.sock"},
		{name: "last wins", env: []string{"DOCKER_HOST=ssh://a", "DOCKER_HOST=unix:///x.sock"}, host: "unix:///x.sock"},
		{name: "tcp", env: []string{"DOCKER_HOST=tcp://127.0.0.1:2375"}, host: "tcp://127.0.0.1:2375"},
		{name: "tcp default port", env: []string{"DOCKER_HOST=tcp://dockerd.internal"}, host: "tcp://dockerd.internal:2375"},
		{name: "tcp ipv6", env: []string{"DOCKER_HOST=tcp://[::1]:2375/"}, host: "tcp://[::1]:2375"},
		{name: "default context", env: []string{"DOCKER_CONTEXT=default"}, host: DefaultHost},
		{name: "empty TLS variables", env: []string{"DOCKER_HOST=tcp://h:1", "DOCKER_TLS_VERIFY=", "DOCKER_CERT_PATH="}, host: "tcp://h:1"},
		{name: "API version ignored", env: []string{"DOCKER_API_VERSION=1.41"}, host: DefaultHost},

		{name: "ssh", env: []string{"DOCKER_HOST=ssh://deploy@box"}, unsupported: true, says: "ssh://"},
		{name: "npipe", env: []string{"DOCKER_HOST=npipe:////./pipe/docker_engine"}, unsupported: true, says: "npipe://"},
		{name: "fd", env: []string{"DOCKER_HOST=fd://"}, unsupported: true, says: "fd://"},
		{name: "https", env: []string{"DOCKER_HOST=https://h:2376"}, unsupported: true, says: "https://"},
		{name: "TLS verify", env: []string{"DOCKER_HOST=tcp://h:2376", "DOCKER_TLS_VERIFY=1"}, unsupported: true, says: "TLS"},
		{name: "cert path", env: []string{"DOCKER_HOST=tcp://h:2376", "DOCKER_CERT_PATH=/etc/docker/certs"}, unsupported: true, says: "TLS"},
		{name: "host beats context", env: []string{"DOCKER_HOST=unix:///x.sock", "DOCKER_CONTEXT=rootless"}, host: "unix:///x.sock"},
		{name: "context without a configuration directory", env: []string{"DOCKER_CONTEXT=prod"}, says: "neither DOCKER_CONFIG nor HOME"},

		{name: "relative unix", env: []string{"DOCKER_HOST=unix://docker.sock"}, says: "absolute socket path"},
		{name: "unix without path", env: []string{"DOCKER_HOST=unix://"}, says: "absolute socket path"},
		{name: "no scheme", env: []string{"DOCKER_HOST=/var/run/docker.sock"}, says: "not a URL"},
		{name: "tcp with path", env: []string{"DOCKER_HOST=tcp://h:2375/api"}, says: "host and a port only"},
		{name: "tcp with user", env: []string{"DOCKER_HOST=tcp://me:pw@h:2375"}, says: "host and a port only"},
		{name: "tcp bad port", env: []string{"DOCKER_HOST=tcp://h:99999"}, says: "no valid port"},
		{name: "tcp no host", env: []string{"DOCKER_HOST=tcp://:2375"}, says: "host and a port only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.env, Options{})
			if tt.host != "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				defer func() { _ = c.Close() }()
				if got := c.Host(); got != tt.host {
					t.Fatalf("Host() = %q, want %q", got, tt.host)
				}
				return
			}
			if err == nil {
				t.Fatalf("New succeeded with %s, want an error", c.Host())
			}
			if got := errors.Is(err, ErrUnsupported); got != tt.unsupported {
				t.Fatalf("errors.Is(err, ErrUnsupported) = %v, want %v: %v", got, tt.unsupported, err)
			}
			var e *Error
			if !errors.As(err, &e) || e.Op != "endpoint" {
				t.Fatalf("want an *Error of op endpoint, got %#v", err)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("error %q does not say %q", err, tt.says)
			}
			if strings.Contains(err.Error(), "pw@") {
				t.Fatalf("error %q shows the password of DOCKER_HOST", err)
			}
		})
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
	if err != nil {
		t.Fatal(err)
	}
	if c.timeout != DefaultTimeout || c.maxBody != DefaultMaxBody || c.log == nil {
		t.Fatalf("zero Options: timeout %v, max body %d, logger %v; want the defaults", c.timeout, c.maxBody, c.log)
	}
}
