// Package stdinwatch ends a fake program's serving when the parent that started it
// goes away: a harness holds the program's stdin open and never writes to it, so
// stdin's end (EOF or an error) means the harness is gone, even when it died without
// a chance to send a signal. cmd/monky-fakes and the fake docker's serve-engine
// command both serve until then.
package stdinwatch

import (
	"context"
	"errors"
	"io"
)

// ErrClosed is the cause (context.Cause) of a context from Context that ended because
// stdin closed.
var ErrClosed = errors.New("stdin closed")

// Context returns a copy of ctx that also ends, with cause ErrClosed, once stdin is
// read to its end or fails: the program's parent went away. With watch false stdin is
// not read and the copy ends only with ctx. Call the CancelFunc when done with it; the read of
// stdin goes on until stdin ends, as a read cannot be stopped.
func Context(ctx context.Context, stdin io.Reader, watch bool) (context.Context, context.CancelFunc) {
	ctx, cancelCause := context.WithCancelCause(ctx)
	if watch {
		go func() {
			_, _ = io.Copy(io.Discard, stdin)
			cancelCause(ErrClosed)
		}()
	}
	return ctx, func() { cancelCause(context.Canceled) }
}
