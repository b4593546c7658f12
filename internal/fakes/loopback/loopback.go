// Package loopback is what the fakes (faketenancy, fakebao) share to start: a server
// on 127.0.0.1:0, their options' defaults, and New's panic where Start fails.
package loopback

import (
	"cmp"
	"net"
	"net/http"
	"time"
)

// Serve serves h on a new listener on 127.0.0.1:0 until the server is closed.
func Serve(h http.Handler) (*http.Server, net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, ln, nil
}

// Must returns v, or panics with err's message as net/http/httptest does.
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err.Error())
	}
	return v
}

// Default sets *p to d when *p is not above its zero value: "" for a string, 0 or
// less for a number or a duration.
func Default[T cmp.Ordered](p *T, d T) {
	var zero T
	if *p <= zero {
		*p = d
	}
}
