package compose

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
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
// every opts.Progress says how many layers are done. docker's exit status decides:
// an exit 0 is a pull done, even when a child of docker held its output open after
// it (logged). A failure is an *Error whose Kind says whose fault it is:
//   - docker did not exit by itself: ErrDockerTimeout when ctx's deadline passed (the
//     caller's bound for the pull) or a signal the agent did not send killed it;
//     ErrPullFailed with a cause matching context.Canceled when ctx was cancelled
//     (its Code is then codes.Interrupted);
//   - docker exited non-zero: by what the daemon said (pullFailure), ErrImageMissing
//     (the registry has no such image or tag, or denies it to this box),
//     ErrDockerUnavailable, ErrRegistryUnavailable (the registry or the network), a
//     cause matching syscall.ENOSPC (the daemon's disk is full), else ErrPullFailed.
//
// Its Detail is the reference and what the daemon said.
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
	res := c.run(ctx, []string{"pull", "--", ref}, w, w)
	stop()
	lines.flush()
	if res.err == nil {
		c.log.Info("pulled the image", "image", ref, "layers", prog.total(), "duration", time.Since(start).Round(time.Millisecond))
		return nil
	}
	tail, _ := buf.snapshot()
	return pullError(ref, res, tail)
}

// pullError is the Error of a failed pull of ref that ended as res, having printed out.
func pullError(ref string, res result, out []byte) error {
	switch {
	case errors.Is(res.err, ErrDockerTimeout):
		return &Error{Op: "pull", Kind: ErrDockerTimeout, ExitCode: res.code, Detail: ref, Err: res.err}
	case errors.Is(res.err, context.Canceled):
		return &Error{Op: "pull", Kind: ErrPullFailed, ExitCode: res.code, Detail: ref, Err: res.err}
	}
	cause, kind := pullFailure(out)
	return &Error{Op: "pull", Kind: kind, ExitCode: res.code, Detail: ref + ": " + daemonSaid(out), Err: cause(res.err)}
}

// missingMarks are what the daemon says of an image or tag its registry does not
// have, or denies to this box (distribution/errors.go: a 404 and a denied pull look
// alike to anonymous clients; a 401 or 403 is a login the box lacks), or does not
// have for this box's platform. The containerd image store says "not found" of a
// reference it cannot resolve (notFoundRe).
var missingMarks = []string{
	"manifest unknown",
	"not found: manifest unknown",
	"repository does not exist",
	"pull access denied",
	"no matching manifest for",
	"invalid reference format",
	"name unknown",
	": unauthorized:",
	": denied:",
	"401 Unauthorized",
	"403 Forbidden",
	"404 Not Found",
}

// notFoundRe is the containerd image store's word for a reference its registry does
// not have: failed to resolve reference "docker.io/library/x:1": docker.io/library/x:1: not found.
var notFoundRe = regexp.MustCompile(`failed to resolve reference "[^"]*": [^\n]*: not found`)

// registryDownMarks are what the daemon (the classic store and containerd's) says
// when it could not talk to the registry: the network (refused, reset, DNS, no
// route, a proxy), TLS, a timeout, an HTTP request to the registry that failed, an
// answer of the registry that is an error of its own (5xx, 429 toomanyrequests), or
// a download cut short. Matched after missingMarks: a registry that answered "no such
// image" or "denied" said so over a request that worked.
var registryDownMarks = []string{
	"dial tcp", "dial udp", "proxyconnect", "connection refused", "connection reset",
	"no route to host", "network is unreachable", "no such host", "server misbehaving",
	"name resolution", "i/o timeout", "TLS handshake", "tls: ", "x509: ",
	"server gave HTTP response to HTTPS client", "net/http: ", "request canceled",
	"Client.Timeout exceeded", "context deadline exceeded",
	"received unexpected HTTP status", "unexpected status code", "unexpected status from",
	"toomanyrequests", "Too Many Requests", "unexpected EOF", "failed to do request",
	`Get "http`, "Get http", `Head "http`, "Head http",
}

// pullFailure is whose fault a failed pull is, by what docker printed: the kind of
// what to wrap its cause with, and the kind of its Error. The daemon out of reach,
// then a full disk, then an image the registry lacks or denies, then a registry or
// network that failed; anything else is the box's docker (ErrPullFailed).
func pullFailure(out []byte) (wrap func(error) error, kind error) {
	keep := func(err error) error { return err }
	switch {
	case daemonDown(out):
		return func(err error) error { return fmt.Errorf("%w: %w", ErrDockerUnavailable, err) }, ErrDockerUnavailable
	case bytes.Contains(out, []byte("no space left on device")):
		return func(err error) error { return fmt.Errorf("%w: %w", syscall.ENOSPC, err) }, ErrPullFailed
	case containsAny(out, missingMarks) || notFoundRe.Match(out):
		return keep, ErrImageMissing
	case containsAny(out, registryDownMarks):
		return keep, ErrRegistryUnavailable
	}
	return keep, ErrPullFailed
}

// containsAny reports whether out contains one of marks.
func containsAny(out []byte, marks []string) bool {
	for _, m := range marks {
		if bytes.Contains(out, []byte(m)) {
			return true
		}
	}
	return false
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
