package compose

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Defaults of Config.
const (
	DefaultDocker      = "docker"
	DefaultOutputLimit = 64 << 10
	// DefaultLogLines is the --tail of Logs when lines is not positive.
	DefaultLogLines = 100
	// maxPSOutput caps what ps may print: it is parsed whole.
	maxPSOutput = 16 << 20
)

// Config configures a Client. Zero values are documented defaults.
type Config struct {
	// Docker is the docker program: a name looked up in the PATH of Env (never the
	// process's), or a path. Default "docker".
	Docker string
	// Project is the compose project name (required): --project-name.
	Project string
	// Dir is the project directory (required, absolute): --project-directory and the
	// working directory of docker.
	Dir string
	// Files are the compose files relative to Dir, passed as -f each, in order. Empty:
	// compose finds compose.yaml in Dir by itself.
	Files []string
	// Env is the complete environment of docker ("K=V"). The process environment is
	// never inherited (compose interpolates from it: docs/ARCHITECTURE.md); an empty Env runs
	// docker with no environment at all, and then "docker" cannot be looked up.
	Env []string
	// Logger receives what happened; nil discards.
	Logger *slog.Logger
	// OutputLimit is how many bytes of output (the tail) are kept. Default 64 KiB.
	OutputLimit int
	// Reader reads the containers' state for WaitHealthy, HealthEvidence and Observe.
	// Nil: the docker CLI (PS and Inspect).
	Reader Reader
}

// Client runs docker compose for one project. It is safe for concurrent use, but
// compose itself is not: callers run one command at a time per project.
type Client struct {
	docker  string
	project string
	base    []string // compose global flags
	dir     string
	env     []string
	log     *slog.Logger
	limit   int
	reader  Reader
	// waitDelay is how long docker's output may outlive docker, and docker its kill:
	// defaultWaitDelay (5 s); tests of this package shorten it.
	waitDelay time.Duration
}

// Output is what a docker command printed: the bounded tail of its combined stdout
// and stderr.
type Output struct {
	// Tail is the last OutputLimit bytes of output.
	Tail []byte
	// Dropped is how many bytes were printed before Tail and not kept.
	Dropped int64
	// ExitCode is docker's exit code, or -1 when it did not exit by itself (killed,
	// not started).
	ExitCode int
	// Stop says why docker did not exit by itself when it started and ExitCode is -1:
	// StopCancelled, StopDeadline or StopSignal. "" when docker exited (or did not
	// start).
	Stop Stop
	// Lingered says that docker's output was still open 5 s (the wait delay) after
	// docker exited (a child of docker held it): the Client closed its end then, and
	// Tail holds what was read before. The exit status decides all the same: with ExitCode 0 the command
	// succeeded. HeldBy names the processes that held it ("pid 4242 (sleep)"), when
	// /proc shows them to the agent.
	Lingered bool
	HeldBy   []string
}

// String returns the tail as text.
func (o Output) String() string { return string(o.Tail) }

// ServiceState is what a report carries about one service (docs/PROTOCOL.md).
type ServiceState struct {
	// Name is the compose service name.
	Name string `json:"name"`
	// State is the docker state of its container (the worst one when it has several),
	// or StateMissing when it has none.
	State string `json:"state"`
	// Health is the container's health, "" without a healthcheck.
	Health string `json:"health"`
}

// ProjectNamePattern is compose's rule for a project name, as a regular expression for
// messages: lowercase letters, digits, '-' and '_', starting with a letter or digit.
const ProjectNamePattern = `^[a-z0-9][a-z0-9_-]*$`

var projectNameRe = regexp.MustCompile(ProjectNamePattern)

// ValidProjectName reports whether name is a compose project name: it matches
// ProjectNamePattern. New and the agent's config check use it.
func ValidProjectName(name string) bool { return projectNameRe.MatchString(name) }

// New checks cfg and returns a Client. It does not run docker.
func New(cfg Config) (*Client, error) {
	if cfg.Project == "" {
		return nil, errors.New("compose: Config.Project is required")
	}
	if !ValidProjectName(cfg.Project) {
		return nil, fmt.Errorf("compose: project name %q: want lowercase letters, digits, '-' and '_', starting with a letter or digit", cfg.Project)
	}
	if cfg.Dir == "" || !filepath.IsAbs(cfg.Dir) {
		return nil, fmt.Errorf("compose: project directory %q: want an absolute path", cfg.Dir)
	}
	if cfg.OutputLimit < 0 {
		return nil, fmt.Errorf("compose: OutputLimit %d: want zero (default) or more", cfg.OutputLimit)
	}
	c := &Client{
		docker:  cfg.Docker,
		project: cfg.Project,
		dir:     filepath.Clean(cfg.Dir),
		env:     append([]string{}, cfg.Env...), // non-nil: os/exec inherits on nil
		log:     cfg.Logger,
		limit:   cfg.OutputLimit,
		reader:  cfg.Reader,

		waitDelay: defaultWaitDelay,
	}
	if c.docker == "" {
		c.docker = DefaultDocker
	}
	if c.limit == 0 {
		c.limit = DefaultOutputLimit
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.log = c.log.With("project", cfg.Project)
	c.base = []string{"compose", "--project-name", cfg.Project, "--project-directory", c.dir}
	for _, f := range cfg.Files {
		if f == "" || path.IsAbs(f) || filepath.IsAbs(f) || strings.Contains(f, "\\") ||
			slicesContains(strings.Split(f, "/"), "..") {
			return nil, fmt.Errorf("compose: compose file %q: want a path relative to the project directory, without \"..\" elements", f)
		}
		c.base = append(c.base, "-f", f)
	}
	return c, nil
}

func slicesContains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Up runs docker compose up -d --remove-orphans. On failure the error matches
// ErrApplyFailed (code APPLY_FAILED when compose exited non-zero; Error.Code gives
// the box's code of a cause that is the box's, such as DOCKER_TIMEOUT) and Output
// keeps the tail of what compose printed.
func (c *Client) Up(ctx context.Context) (Output, error) {
	start := time.Now()
	out, err := c.runLogged(ctx, "up", ErrApplyFailed, c.composeArgs("up", "-d", "--remove-orphans"))
	if err != nil {
		c.log.Warn("docker compose up failed; the tail of its output goes into the report; to look yourself: "+c.hint("ps --all"),
			"dir", c.dir, "exit_code", out.ExitCode, "error", err)
		return out, err
	}
	c.log.Info("docker compose up done", "dir", c.dir, "duration", time.Since(start).Round(time.Millisecond))
	return out, nil
}

// Down runs docker compose down --remove-orphans, with -v (remove the project's
// volumes) when volumes is true. Failure matches ErrApplyFailed.
func (c *Client) Down(ctx context.Context, volumes bool) (Output, error) {
	args := c.composeArgs("down", "--remove-orphans")
	if volumes {
		args = append(args, "-v")
	}
	out, err := c.runLogged(ctx, "down", ErrApplyFailed, args)
	if err != nil {
		c.log.Warn("docker compose down failed; containers of the project may still run; to look yourself: "+c.hint("ps --all"),
			"dir", c.dir, "volumes", volumes, "exit_code", out.ExitCode, "error", err)
		return out, err
	}
	c.log.Info("docker compose down done", "dir", c.dir, "volumes", volumes)
	return out, nil
}

// PS runs docker compose ps --all --format json and parses either shape. Failure
// matches ErrCommandFailed; so does output that stayed open after docker exited
// (Output.Lingered), which may be cut.
func (c *Client) PS(ctx context.Context) ([]Container, error) {
	stdout := &capBuffer{max: maxPSOutput}
	stderr := newTailBuffer(c.limit)
	res := c.run(ctx, c.composeArgs("ps", "--all", "--format", "json"), stdout, stderr)
	if stdout.overflow {
		return nil, &Error{Op: "ps", Kind: ErrCommandFailed, ExitCode: res.code,
			Detail: fmt.Sprintf("ps printed more than %d bytes", maxPSOutput)}
	}
	if res.err != nil {
		tail, _ := stderr.snapshot()
		return nil, &Error{Op: "ps", Kind: ErrCommandFailed, ExitCode: res.code, Err: failureCause(res.err, tail)}
	}
	if res.lingered {
		return nil, cutOutput("ps", res)
	}
	cs, err := ParsePS(stdout.buf)
	if err != nil {
		return nil, &Error{Op: "ps", Kind: ErrCommandFailed, ExitCode: res.code, Err: err}
	}
	return cs, nil
}

// Logs runs docker compose logs --no-color --tail N for services (all when empty) and
// returns at most OutputLimit bytes: the tail. lines ≤ 0 means DefaultLogLines.
// Failure matches ErrCommandFailed; the bytes printed so far are returned with it.
func (c *Client) Logs(ctx context.Context, services []string, lines int) ([]byte, error) {
	if lines <= 0 {
		lines = DefaultLogLines
	}
	args := c.composeArgs("logs", "--no-color", "--tail", strconv.Itoa(lines))
	for _, s := range services {
		if s == "" || strings.HasPrefix(s, "-") {
			return nil, &Error{Op: "logs", Kind: ErrCommandFailed, ExitCode: -1, Services: []string{s},
				Detail: fmt.Sprintf("service name %q is not a compose service name", s)}
		}
	}
	args = append(args, services...)
	out, err := c.runTail(ctx, "logs", ErrCommandFailed, args)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Services = append([]string(nil), services...)
		}
	}
	return out.Tail, err
}

// DockerVersion returns the docker server version (docker version --format
// {{.Server.Version}}), for the check-in's host info. With no daemon docker fails and
// so does DockerVersion (ErrCommandFailed): the caller sends "".
func (c *Client) DockerVersion(ctx context.Context) (string, error) {
	out, err := c.runTail(ctx, "version", ErrCommandFailed, []string{"version", "--format", "{{.Server.Version}}"})
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(out.Tail))
	if !ValidServerVersion(v) {
		return "", &Error{Op: "version", Kind: ErrCommandFailed, ExitCode: out.ExitCode, Detail: "docker printed no server version"}
	}
	return v, nil
}

// ValidServerVersion reports whether v can be a docker server version as a check-in
// sends it: 1 to 64 printable characters without spaces. Whatever the daemon answers,
// through the CLI or the Engine API, passes here first.
func ValidServerVersion(v string) bool {
	if v == "" || len(v) > 64 {
		return false
	}
	for _, r := range v {
		if r <= ' ' || r == 0x7f || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// cutOutput is the error of a read whose output is parsed whole (ps, inspect) when
// docker exited 0 but its output stayed open past the wait delay: what was read may
// be cut, and a cut list of containers would be a wrong answer, so it is not read.
// The callers retry a read (the health wait's next poll, the next check-in).
func cutOutput(op string, res result) error {
	return &Error{Op: op, Kind: ErrCommandFailed, ExitCode: res.code,
		Detail: "docker exited 0, but its output stayed open after it exited (held by " + heldBy(res.heldBy) + "), and was cut there: not read"}
}

// hint is the shell command an operator runs to look at the project by hand.
func (c *Client) hint(sub string) string {
	return "cd " + c.dir + " && docker compose -p " + c.project + " " + sub
}

func (c *Client) composeArgs(args ...string) []string {
	return append(append([]string(nil), c.base...), args...)
}

// runTail runs docker with stdout and stderr into one tail buffer.
func (c *Client) runTail(ctx context.Context, op string, kind error, args []string) (Output, error) {
	buf := newTailBuffer(c.limit)
	return tailResult(buf, op, kind, c.run(ctx, args, buf, buf))
}

// runLogged is runTail with every line of the output logged as it comes (up, down:
// the commands that take minutes).
func (c *Client) runLogged(ctx context.Context, op string, kind error, args []string) (Output, error) {
	buf := newTailBuffer(c.limit)
	lines := newLineLog(c.log, "docker compose "+op)
	w := io.MultiWriter(buf, lines)
	res := c.run(ctx, args, w, w)
	lines.flush()
	return tailResult(buf, op, kind, res)
}

// tailResult is the Output of a command and, when it failed, its Error.
func tailResult(buf *tailBuffer, op string, kind error, res result) (Output, error) {
	tail, dropped := buf.snapshot()
	out := Output{Tail: tail, Dropped: dropped, ExitCode: res.code, Stop: res.stop, Lingered: res.lingered, HeldBy: res.heldBy}
	if res.err != nil {
		return out, &Error{Op: op, Kind: kind, ExitCode: res.code, Err: failureCause(res.err, tail)}
	}
	return out, nil
}

// lookPath finds name in the PATH of env (the last PATH entry wins, as in os/exec).
// Only absolute PATH directories are searched. A name with a slash is used as is.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		if err := executable(name); err != nil {
			return "", fmt.Errorf("docker program %s: %w", name, err)
		}
		return name, nil
	}
	pathVar := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathVar = v
		}
	}
	for _, dir := range filepath.SplitList(pathVar) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q not found in the PATH of the compose environment (%q): %w", name, pathVar, exec.ErrNotFound)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}
