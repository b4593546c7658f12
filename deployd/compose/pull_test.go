package compose

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/internal/fakes/fakedocker"
	"github.com/monky/monky-deployd/internal/fakes/fakedocker/fakedockertest"
)

// TestPullFailureWhoseFault: what the daemon says of a failed pull decides whose
// fault it is. The messages are the daemon's own (moby distribution/errors.go and
// what docker pull printed on dockerd 20.10 against a local registry).
func TestPullFailureWhoseFault(t *testing.T) {
	for _, c := range []struct {
		said string
		kind error
		code codes.Code
	}{
		{"Error response from daemon: manifest for localhost:5000/app:nope not found: manifest unknown: manifest unknown", ErrImageMissing, codes.ImageMissing},
		{"Error response from daemon: pull access denied for nosuch/app, repository does not exist or may require 'docker login': denied: requested access to the resource is denied", ErrImageMissing, codes.ImageMissing},
		{"Error response from daemon: manifest for localhost:5000/nosuch:1 not found: manifest unknown: name unknown", ErrImageMissing, codes.ImageMissing},
		{"no matching manifest for linux/arm64/v8 in the manifest list entries", ErrImageMissing, codes.ImageMissing},
		{"invalid reference format: repository name must be lowercase", ErrImageMissing, codes.ImageMissing},
		{`Error response from daemon: Get "http://127.0.0.1:5999/v2/": dial tcp 127.0.0.1:5999: connect: connection refused`, ErrRegistryUnavailable, codes.RegistryUnavailable},
		{`Error response from daemon: Get "https://registry-1.docker.io/v2/": net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers)`, ErrRegistryUnavailable, codes.RegistryUnavailable},
		{"Error response from daemon: toomanyrequests: You have reached your pull rate limit.", ErrRegistryUnavailable, codes.RegistryUnavailable},
		{"Error response from daemon: received unexpected HTTP status: 503 Service Unavailable", ErrRegistryUnavailable, codes.RegistryUnavailable},
		{"Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?", ErrDockerUnavailable, codes.DockerUnavailable},
	} {
		t.Run(c.said, func(t *testing.T) {
			wrap, kind := pullFailure([]byte("5e6f7a8b9c0d: Pulling fs layer\n" + c.said + "\n"))
			assert.Equal(t, c.kind, kind)
			err := &Error{Op: "pull", Kind: kind, Err: wrap(errors.New("exit status 1"))}
			assert.Equal(t, c.code, err.Code())
			assert.Equal(t, strings.TrimPrefix(c.said, "Error response from daemon: "), daemonSaid([]byte("x: Pulling fs layer\n"+c.said+"\n")))
		})
	}
	wrap, kind := pullFailure([]byte("failed to register layer: write /var/lib/docker/x: no space left on device\n"))
	assert.ErrorIs(t, wrap(errors.New("exit status 1")), syscall.ENOSPC, "a full data root is the box's DISK_FULL")
	assert.Equal(t, ErrCommandFailed, kind)
	assert.Equal(t, "docker printed nothing", daemonSaid(nil))
	assert.LessOrEqual(t, len(daemonSaid([]byte("Error: "+strings.Repeat("x", 1000)))), maxDaemonSaid+len("…"))
}

// TestPullProgress: the layers docker pull's plain output names are counted, done
// when complete or already there, whatever chunks the output comes in.
func TestPullProgress(t *testing.T) {
	p := newPullProgress(nil, "x")
	out := "1.27: Pulling from library/nginx\n" +
		"a2318d6c47ec: Already exists\n" +
		"0a1b2c3d4e5f: Pulling fs layer\n0a1b2c3d4e5f: Waiting\n" +
		"9f8e7d6c5b4a: Pulling fs layer\n9f8e7d6c5b4a: Downloading\r9f8e7d6c5b4a: Download complete\n" +
		"9f8e7d6c5b4a: Pull complete\nDigest: sha256:abc\nStatus: Downloaded newer image for nginx:1.27\n"
	for i := 0; i < len(out); i += 7 {
		_, _ = p.Write([]byte(out[i:min(i+7, len(out))]))
	}
	done, seen := p.counts()
	assert.Equal(t, 2, done)
	assert.Equal(t, 3, seen)
}

// FuzzPullProgress: any output is read without a panic, and never counts more done
// layers than seen.
func FuzzPullProgress(f *testing.F) {
	f.Add([]byte("0a1b2c3d4e5f: Pulling fs layer\n0a1b2c3d4e5f: Pull complete\n"))
	f.Add([]byte("\r\r\n: : :\nDigest: x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := newPullProgress(nil, "x")
		_, _ = p.Write(b)
		_, _ = p.Write(b)
		done, seen := p.counts()
		if done > seen || seen > strings.Count(string(b), ":")*2 {
			t.Fatalf("done %d, seen %d", done, seen)
		}
	})
}

// TestPullThroughTheFake: Pull runs docker pull, logs its lines, and a slow pull says
// how far it is; MissingImages finds the image afterwards, asking once when all
// are held. A missing tag is
// ErrImageMissing naming the image and what the daemon said.
func TestPullThroughTheFake(t *testing.T) {
	fx := newFixture(t, &fakedockertest.Script{
		MissingImages: []string{"registry.monky.internal/web:9"},
		Commands:      map[string]fakedocker.Command{"pull": {Delay: fakedocker.Duration(150 * time.Millisecond)}},
	})
	ctx := context.Background()
	missing, err := fx.client.MissingImages(ctx, []string{"registry.monky.internal/web:1.4.2"})
	require.NoError(t, err)
	assert.Equal(t, []string{"registry.monky.internal/web:1.4.2"}, missing)

	require.NoError(t, fx.client.Pull(ctx, "registry.monky.internal/web:1.4.2", PullOptions{Progress: 40 * time.Millisecond}))
	calls := len(fx.docker.Calls())
	missing, err = fx.client.MissingImages(ctx, []string{"registry.monky.internal/web:1.4.2", "registry.monky.internal/worker:1.4.2"})
	require.NoError(t, err)
	assert.Equal(t, []string{"registry.monky.internal/worker:1.4.2"}, missing, "the one not pulled")
	assert.Len(t, fx.docker.Calls(), calls+3, "one call for both, then one each")
	calls = len(fx.docker.Calls())
	missing, err = fx.client.MissingImages(ctx, []string{"registry.monky.internal/web:1.4.2"})
	require.NoError(t, err)
	assert.Empty(t, missing)
	assert.Len(t, fx.docker.Calls(), calls+1, "every image held: one docker call")
	logs := fx.logs.String()
	assert.Contains(t, logs, "still pulling the image")
	assert.Contains(t, logs, `output="Status: Downloaded newer image for registry.monky.internal/web:1.4.2"`)
	assert.Contains(t, logs, "pulled the image")

	err = fx.client.Pull(ctx, "registry.monky.internal/web:9", PullOptions{})
	require.ErrorIs(t, err, ErrImageMissing)
	assert.Contains(t, err.Error(), "registry.monky.internal/web:9: manifest for registry.monky.internal/web:9 not found: manifest unknown")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	err = fx.client.Pull(cancelled, "registry.monky.internal/web:1.4.2", PullOptions{})
	require.ErrorIs(t, err, context.Canceled)
}
