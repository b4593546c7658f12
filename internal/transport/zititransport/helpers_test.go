package zititransport

import (
	"context"
	"testing"

	"github.com/monky/monky-deployd/internal/transport"
	"github.com/monky/monky-deployd/internal/transport/transporttest"
)

// get does a GET of rawURL with c and returns the body (transporttest.Get).
func get(ctx context.Context, t *testing.T, c *transport.Client, rawURL string) (string, error) {
	t.Helper()
	return transporttest.Get(ctx, t, c.HTTP, rawURL)
}
