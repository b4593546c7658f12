package zititransport

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/internal/transport"

	"github.com/monky/monky-deployd/internal/transport/transporttest"
)

// TestNewProxyAndSystem: New builds the other transports as transport.New does.
func TestNewProxyAndSystem(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("tenancy says hello"))
	}))
	t.Cleanup(srv.Close)

	c, err := New(t.Context(), transport.Config{Transport: transport.TransportSystem, URL: srv.URL})
	require.NoError(t, err)
	assert.Equal(t, transport.TransportSystem, c.Transport())
	body, err := get(t.Context(), t, c, srv.URL+"/v1/agent/checkin")
	require.NoError(t, err)
	assert.Equal(t, "tenancy says hello", body)
	require.NoError(t, c.Close())

	p, err := New(t.Context(), transport.Config{Transport: transport.TransportProxy, URL: "https://" + transporttest.TenancyName, Proxy: "http://127.0.0.1:8080"})
	require.NoError(t, err)
	assert.Equal(t, transport.TransportProxy, p.Transport())
	require.NoError(t, p.Close())
}

func TestNewConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  transport.Config
		key  string
	}{
		// The config is checked before the identity file is read.
		{"sdk without service", transport.Config{Transport: transport.TransportSDK, URL: "https://t", Identity: "/x.json"}, "tenancy.service"},
		{"sdk with a bad url", transport.Config{Transport: transport.TransportSDK, URL: "ftp://t", Service: "s", Identity: "/x.json"}, "tenancy.url"},
		{"sdk without identity", transport.Config{Transport: transport.TransportSDK, URL: "https://t", Service: "s"}, "tenancy.identity"},
		{"unknown transport", transport.Config{Transport: "carrier-pigeon", URL: "https://t"}, "tenancy.transport"},
		{"proxy without proxy", transport.Config{Transport: transport.TransportProxy, URL: "https://t"}, "tenancy.proxy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(t.Context(), tc.cfg)
			require.Nil(t, c)
			require.ErrorIs(t, err, transport.ErrInvalidConfig)
			var te *transport.Error
			require.ErrorAs(t, err, &te)
			assert.Equal(t, tc.key, te.Key)
		})
	}

	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		for _, kind := range []string{transport.TransportSDK, transport.TransportSystem} {
			_, err := New(ctx, transport.Config{Transport: kind, URL: "https://t", Service: "s", Identity: "/x.json"})
			require.ErrorIs(t, err, context.Canceled)
		}
	})
}
