package compose

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultPullProgress is how often Pull logs its progress when PullOptions.Progress
// is zero.
const DefaultPullProgress = 20 * time.Second

// PullOptions configure Pull. The zero value is ready to use.
type PullOptions struct {
	// Progress is how often a line says how far the pull is (layers done of those
	// seen). Default DefaultPullProgress.
	Progress time.Duration
}

// MissingImages returns the images of refs the daemon does not hold, in the order
// of refs (docker image inspect). The common case, every image held, is one docker
// call; when one is missing, each is asked alone, so that no message of docker's
// has to be matched to its reference. A daemon that cannot be reached matches
// ErrDockerUnavailable.
func (c *Client) MissingImages(ctx context.Context, refs []string) ([]string, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	held, err := c.holds(ctx, refs)
	if err != nil || held {
		return nil, err
	}
	var missing []string
	for _, ref := range refs {
		held, err := c.holds(ctx, []string{ref})
		if err != nil {
			return nil, err
		}
		if !held {
			missing = append(missing, ref)
		}
	}
	return missing, nil
}

// holds reports whether the daemon holds every image of refs.
func (c *Client) holds(ctx context.Context, refs []string) (bool, error) {
	args := append([]string{"image", "inspect", "--format", "{{.Id}}", "--"}, refs...)
	out, err := c.runTail(ctx, "image inspect", ErrCommandFailed, args)
	if err == nil {
		return true, nil
	}
	if ctx.Err() == nil && !errors.Is(err, ErrDockerUnavailable) && bytes.Contains(out.Tail, []byte("No such image")) {
		return false, nil
	}
	return false, err
}

// Pull pulls the image ref (docker pull), with the docker CLI's own registry
// credentials, as compose up would. Its output is logged line by line, and a line
// every opts.Progress says how many layers are done. A failure is an *Error whose
// Kind says whose fault it is: ErrImageMissing (the registry has no such image or
// tag, or denies it to this box), ErrDockerUnavailable, ErrRegistryUnavailable (any
// other: the registry or the network, and a ctx that ends, such as the caller's
// deadline for the pull); no space left on the daemon's disk matches syscall.ENOSPC.
// Its Detail is what the daemon said.
func (c *Client) Pull(ctx context.Context, ref string, opts PullOptions) error {
	if opts.Progress <= 0 {
		opts.Progress = DefaultPullProgress
	}
	start := time.Now()
	buf := newTailBuffer(c.limit)
	prog := newPullProgress(c.log, ref)
	lines := newLineLog(c.log, "docker pull")
	w := io.MultiWriter(buf, lines, prog)
	stop := prog.every(opts.Progress, start)
	code, err := c.run(ctx, []string{"pull", "--", ref}, w, w)
	stop()
	lines.flush()
	if err == nil {
		c.log.Info("pulled the image", "image", ref, "layers", prog.total(), "duration", time.Since(start).Round(time.Millisecond))
		return nil
	}
	tail, _ := buf.snapshot()
	if ctx.Err() != nil {
		return &Error{Op: "pull", Kind: ErrRegistryUnavailable, ExitCode: code, Detail: ref, Err: err}
	}
	cause, kind := pullFailure(tail)
	return &Error{Op: "pull", Kind: kind, ExitCode: code, Detail: ref + ": " + daemonSaid(tail), Err: cause(err)}
}

// missingMarks are what the daemon says of an image or tag its registry does not
// have, or denies to this box (distribution/errors.go: a 404 and a denied pull look
// alike to anonymous clients), or does not have for this box's platform.
var missingMarks = []string{
	"manifest unknown",
	"not found: manifest unknown",
	"repository does not exist",
	"pull access denied",
	"no matching manifest for",
	"invalid reference format",
	"name unknown",
}

// pullFailure is whose fault a failed pull is, by what docker printed: the kind of
// what to wrap its cause with, and the kind of its Error.
func pullFailure(out []byte) (wrap func(error) error, kind error) {
	keep := func(err error) error { return err }
	switch {
	case daemonDown(out):
		return func(err error) error { return fmt.Errorf("%w: %w", ErrDockerUnavailable, err) }, ErrDockerUnavailable
	case bytes.Contains(out, []byte("no space left on device")):
		return func(err error) error { return fmt.Errorf("%w: %w", syscall.ENOSPC, err) }, ErrCommandFailed
	}
	for _, m := range missingMarks {
		if bytes.Contains(out, []byte(m)) {
			return keep, ErrImageMissing
		}
	}
	return keep, ErrRegistryUnavailable
}

// maxDaemonSaid bounds the daemon's message kept in an error.
const maxDaemonSaid = 300

// daemonSaid is the last line docker printed that names an error (else its last
// line), without docker's "Error response from daemon: " prefix, bounded.
func daemonSaid(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	said := strings.TrimSpace(lines[len(lines)-1])
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); strings.Contains(strings.ToLower(l), "error") {
			said = l
			break
		}
	}
	said = strings.TrimPrefix(said, "Error response from daemon: ")
	if len(said) > maxDaemonSaid {
		said = said[:maxDaemonSaid] + "…"
	}
	if said == "" {
		return "docker printed nothing"
	}
	return said
}

// pullProgress follows docker pull's plain output: one line per layer event
// ("<id>: Pulling fs layer", "<id>: Pull complete", "<id>: Already exists").
type pullProgress struct {
	mu      sync.Mutex
	log     *slog.Logger
	ref     string
	partial []byte
	layers  map[string]bool // layer id → done
}

func newPullProgress(log *slog.Logger, ref string) *pullProgress {
	return &pullProgress{log: log, ref: ref, layers: map[string]bool{}}
}

// Write reads the layer events of complete lines; it never fails.
func (p *pullProgress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	data := append(p.partial, b...)
	i := bytes.LastIndexAny(data, "\r\n")
	if i < 0 {
		p.partial = data
		if len(p.partial) > maxLineLen {
			p.partial = p.partial[:0]
		}
		return n, nil
	}
	for _, line := range strings.FieldsFunc(string(data[:i]), func(r rune) bool { return r == '\n' || r == '\r' }) {
		p.event(line)
	}
	p.partial = append(p.partial[:0], data[i+1:]...)
	return n, nil
}

// event notes one line of docker pull.
func (p *pullProgress) event(line string) {
	id, status, ok := strings.Cut(strings.TrimSpace(line), ": ")
	if !ok || !isLayerID(id) {
		return
	}
	switch status {
	case "Pull complete", "Already exists":
		p.layers[id] = true
	default:
		if _, seen := p.layers[id]; !seen {
			p.layers[id] = false
		}
	}
}

// isLayerID reports whether s is the short layer id docker pull prints (12 hex).
func isLayerID(s string) bool {
	if len(s) != 12 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// counts returns the layers done and seen.
func (p *pullProgress) counts() (done, seen int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range p.layers {
		if d {
			done++
		}
	}
	return done, len(p.layers)
}

func (p *pullProgress) total() int { _, seen := p.counts(); return seen }

// every logs the progress every period until the returned stop is called.
func (p *pullProgress) every(period time.Duration, start time.Time) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				d, seen := p.counts()
				p.log.Info("still pulling the image", "image", p.ref, "layers_done", d, "layers_seen", seen,
					"elapsed", time.Since(start).Round(time.Second))
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
