package zititransport

import (
	"context"
	"testing"

	"github.com/monky/monky-deployd/internal/transport"
	"github.com/monky/monky-deployd/internal/transport/transporttest"
)

// tenancyName is the name the test server's certificate is issued for.
const tenancyName = "tenancy.monky.internal"

// The certificate authority and the temp files come from transporttest, shared with
// the other transport package's tests.
type testCA = transporttest.CA

var (
	newTestCA = transporttest.NewCA
	writeFile = transporttest.WriteFile
)

// get does a GET of rawURL with c and returns the body (transporttest.Get).
func get(ctx context.Context, t *testing.T, c *transport.Client, rawURL string) (string, error) {
	t.Helper()
	return transporttest.Get(ctx, t, c.HTTP, rawURL)
}
