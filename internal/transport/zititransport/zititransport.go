// Package zititransport is the sdk transport of internal/transport: the one package
// that links the OpenZiti SDK (docs/TRANSPORTS.md). internal/transport builds the
// "proxy" and "system" transports without it, so that a program that needs no sdk
// transport does not pay for the SDK's package init (which, among other things, loads
// every identity named in ZITI_IDENTITIES: see the package doc of internal/transport).
//
// New builds the tenancy client for all three transports; for "sdk" it loads the
// identity into a ZitiDialer and builds the client over it with
// transport.NewWithOwnedDialer, so that Client.Close closes the OpenZiti context. A
// long-running caller can keep its own ZitiDialer across ticks and give it to
// transport.NewWithDialer instead. Errors are *transport.Error, as in internal/transport.
package zititransport

import (
	"context"

	"github.com/monky/monky-deployd/internal/transport"
)

// New builds the client for cfg.Transport. For "sdk" it checks cfg, loads the identity
// file and creates the OpenZiti context (no network I/O yet: the first dial
// authenticates with the controller), and the Client's Close closes that context. For
// "proxy" and "system" it is transport.New, and nothing of the SDK is touched. ctx
// bounds the loading; it is not kept.
func New(ctx context.Context, cfg transport.Config) (*transport.Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg.Transport != transport.TransportSDK {
		return transport.New(ctx, cfg)
	}
	return transport.NewWithOwnedDialer(cfg, func() (transport.DialCloser, error) {
		zd, err := NewZitiDialer(ctx, cfg)
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return zd, nil
	})
}

var _ transport.DialCloser = (*ZitiDialer)(nil)
