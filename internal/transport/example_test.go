package transport_test

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/monky/monky-deployd/internal/transport"
)

// The system transport, trusting the tenancy server's CA through tenancy.ca_file.
func ExampleNew() {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "%s %s", r.Method, r.URL.Path)
	}))
	defer srv.Close()

	dir, err := os.MkdirTemp("", "transport-example")
	if err != nil {
		panic(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	caFile := filepath.Join(dir, "ca.pem")
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		panic(err)
	}

	c, err := transport.New(context.Background(), transport.Config{
		Transport: transport.TransportSystem,
		URL:       srv.URL,
		CAFile:    caFile,
	})
	if err != nil {
		panic(err)
	}
	defer func() { _ = c.Close() }()

	resp, err := c.HTTP.Get(srv.URL + "/v1/agent/checkin")
	if err != nil {
		panic(err)
	}
	defer func() { _ = resp.Body.Close() }()
	fmt.Println(resp.Status)
	// Output: 200 OK
}

// refusingDialer is an OpenZiti dialer whose identity has no Dial policy for the
// service.
type refusingDialer struct{}

func (refusingDialer) Dial(service string) (net.Conn, error) {
	return nil, &transport.Error{Kind: transport.ErrServiceNotFound, Detail: "no Dial policy"}
}

// A failed OpenZiti dial is a network error for the tenancy client and classifiable
// with errors.Is.
func ExampleError() {
	c, err := transport.NewWithDialer(transport.Config{
		URL:     "https://tenancy.monky.internal",
		Service: "monky-tenancy",
	}, refusingDialer{})
	if err != nil {
		panic(err)
	}
	defer func() { _ = c.Close() }()

	resp, err := c.HTTP.Get("https://tenancy.monky.internal/v1/agent/checkin")
	if err == nil {
		_ = resp.Body.Close()
		panic("the dial did not fail")
	}
	var op *net.OpError
	var te *transport.Error
	fmt.Println(errors.As(err, &op), op.Op, op.Net)
	fmt.Println(errors.Is(err, transport.ErrServiceNotFound), errors.Is(err, transport.ErrUnreachable))
	fmt.Println(errors.As(err, &te), te.Code(), te.Temporary())
	fmt.Println(te)
	// Output:
	// true dial ziti
	// true true
	// true UNAVAILABLE true
	// transport: dial OpenZiti service "monky-tenancy": no Dial policy
}
