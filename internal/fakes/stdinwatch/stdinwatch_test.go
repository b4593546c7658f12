package stdinwatch

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"
)

func TestContext(t *testing.T) {
	t.Run("stdin closes", func(t *testing.T) {
		r, w := io.Pipe()
		ctx, cancel := Context(context.Background(), r, true)
		defer cancel()
		_, _ = w.Write([]byte("ignored"))
		select {
		case <-ctx.Done():
			t.Fatal("ended before stdin closed")
		case <-time.After(20 * time.Millisecond):
		}
		_ = w.Close()
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("did not end when stdin closed")
		}
		if !errors.Is(context.Cause(ctx), ErrClosed) {
			t.Errorf("cause %v, want ErrClosed", context.Cause(ctx))
		}
	})
	t.Run("parent ends", func(t *testing.T) {
		r, w := io.Pipe()
		defer func() { _ = w.Close() }()
		parent, stop := context.WithCancel(context.Background())
		ctx, cancel := Context(parent, r, true)
		defer cancel()
		stop()
		<-ctx.Done()
		if errors.Is(context.Cause(ctx), ErrClosed) {
			t.Error("cause ErrClosed, but stdin is open")
		}
	})
	t.Run("not watched", func(t *testing.T) {
		r, w := io.Pipe()
		_ = w.Close()
		ctx, cancel := Context(context.Background(), r, false)
		select {
		case <-ctx.Done():
			t.Fatal("ended on stdin that is not watched")
		case <-time.After(20 * time.Millisecond):
		}
		cancel()
		<-ctx.Done()
		if errors.Is(context.Cause(ctx), ErrClosed) {
			t.Error("cause ErrClosed after cancel")
		}
	})
}
