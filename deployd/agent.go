package deployd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/monky/monky-deployd/deployd/bao"
	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/engine"
	"github.com/monky/monky-deployd/internal/fsutil"
	"github.com/monky/monky-deployd/internal/release"
	"github.com/monky/monky-deployd/internal/transport"
	"github.com/monky/monky-deployd/internal/transport/zititransport"
)

// DefaultDockerEnv returns the environment docker compose runs with when
// Options.DockerEnv is nil: a standard PATH and nothing else. compose interpolates from
// its process environment, so the agent never lets it inherit the agent's own: what was
// verified is what compose runs.
func DefaultDockerEnv() []string {
	return []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
}

// Options are the parts of an Agent that do not come from the config file. The zero
// value is usable.
type Options struct {
	// Logger receives the agent's log. Nil discards it. The agent wraps it with its
	// Redactor, so every line is redacted.
	Logger *slog.Logger
	// Redactor learns every token, grant and secret value. Nil: the agent makes one.
	Redactor *secret.Redactor
	// TenancyHTTP is the HTTP client to tenancy. Nil: built from Config.Tenancy
	// (sdk, proxy or system transport).
	TenancyHTTP *http.Client
	// BaoHTTP is the HTTP client to OpenBao. Nil: the OpenBao client's default.
	BaoHTTP *http.Client
	// DockerEnv is the complete environment of docker compose ("K=V"). Nil:
	// DefaultDockerEnv().
	DockerEnv []string
	// Hostname is sent in the check-in. Empty: "unknown".
	Hostname string
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
	// After waits d within a tick, as time.After: the pauses between the logins with
	// one lease's grant. Nil: time.After. For tests.
	After func(d time.Duration) <-chan time.Time
	// HealthPoll is the pause between two `docker compose ps` calls of the health
	// wait. Zero: compose.DefaultHealthPoll (2s).
	HealthPoll time.Duration
}

// Agent runs ticks for one box. Build it with New; it is safe to reuse across ticks
// (run --loop keeps one, so the sdk transport stays authenticated), but ticks of one
// box must not overlap: the run lock refuses a second one.
type Agent struct {
	cfg     Config
	opts    Options
	log     *slog.Logger
	red     *secret.Redactor
	tenancy *tenancy.Client
	bao     *bao.Client
	store   *release.Store
	// keys are the trusted signing keys (Config.TrustedKeys); empty: signatures are
	// not asked for.
	keys bundle.KeyRing
	// engine reads container state through the Engine API; nil when DOCKER_HOST
	// names what it does not speak, and reads go through the docker CLI.
	engine  *engine.Client
	closers []func() error
}

// New builds an Agent from a validated config. It opens no connection: the sdk
// transport loads the identity here and authenticates on the first call.
func New(ctx context.Context, cfg Config, opts Options) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	keys, err := cfg.KeyRing()
	if err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, opts: opts, red: opts.Redactor, keys: keys}
	if a.red == nil {
		a.red = secret.NewRedactor()
	}
	base := opts.Logger
	if base == nil {
		base = slog.New(slog.DiscardHandler)
	}
	a.log = slog.New(a.red.Handler(base.Handler())).With("env_id", cfg.EnvID)
	if a.opts.Now == nil {
		a.opts.Now = time.Now
	}
	if a.opts.After == nil {
		a.opts.After = time.After
	}
	a.store = release.New(cfg.DeployDir, a.log)
	if a.opts.DockerEnv == nil {
		a.opts.DockerEnv = DefaultDockerEnv()
	}
	if a.opts.Hostname == "" {
		a.opts.Hostname = "unknown"
	}

	if err := a.connectTenancy(ctx); err != nil {
		_ = a.Close() // the construction error is the one worth returning
		return nil, err
	}
	if err := a.connectBao(); err != nil {
		_ = a.Close() // the construction error is the one worth returning
		return nil, err
	}
	a.connectDocker()
	return a, nil
}

// connectDocker builds the Engine API client that reads container state (the live
// health, the health wait, the evidence, images) in milliseconds. When DOCKER_HOST
// names what it does not speak (ssh, TLS; engine.Resolve finds the endpoint as the
// docker CLI does) reads go through the docker CLI, which does; changes (up, down)
// always do.
func (a *Agent) connectDocker() {
	ec, err := engine.New(a.opts.DockerEnv, engine.Options{Logger: a.log})
	if err != nil {
		a.log.Debug("reading container state through the docker CLI", "why", err)
		return
	}
	a.engine = ec
	a.closers = append(a.closers, ec.Close)
}

// reader is what compose reads container state with: the Engine API client, or nil
// (the docker CLI).
func (a *Agent) reader() compose.Reader {
	if a.engine == nil {
		return nil
	}
	return a.engine
}

// connectTenancy builds the tenancy transport (unless Options.TenancyHTTP is set) and
// client. It opens no connection.
func (a *Agent) connectTenancy(ctx context.Context) error {
	httpc := a.opts.TenancyHTTP
	if httpc == nil {
		tc, err := zititransport.New(ctx, transport.Config{
			Transport:  a.cfg.Tenancy.Transport,
			URL:        a.cfg.Tenancy.URL,
			Service:    a.cfg.Tenancy.Service,
			Identity:   a.cfg.Tenancy.Identity,
			Proxy:      a.cfg.Tenancy.Proxy,
			CAFile:     a.cfg.Tenancy.CAFile,
			ServerName: a.cfg.Tenancy.ServerName,
			// Shorter than the call's deadline, so that a dial that hangs (a frozen
			// controller) ends with the transport's error, which names the service and
			// the controller, rather than the call's bare deadline.
			Timeout: time.Duration(a.cfg.Tenancy.Timeout) * 4 / 5,
			Logger:  a.log,
		})
		if err != nil {
			return &Error{Op: "tenancy transport", Code: codes.ConfigInvalid, Err: err}
		}
		httpc = tc.HTTP
		a.closers = append(a.closers, tc.Close)
	}
	tcl, err := tenancy.New(tenancy.Config{
		BaseURL:    a.cfg.Tenancy.URL,
		HTTPClient: httpc,
		Token:      a.bearer,
		UserAgent:  "monky-deployd/" + Version,
		Timeout:    time.Duration(a.cfg.Tenancy.Timeout),
		AuthMount:  a.cfg.Bao.AuthMount,
		Role:       a.cfg.Bao.Role,
		Secrets:    a.red,
		Logger:     a.log,
		Now:        a.opts.Now, // one clock for the tick and its lease checks
	})
	if err != nil {
		return &Error{Op: "tenancy client", Code: codes.ConfigInvalid, Err: err}
	}
	a.tenancy = tcl
	return nil
}

// connectBao builds the OpenBao client.
func (a *Agent) connectBao() error {
	bcl, err := bao.New(bao.Config{
		Addr:       a.cfg.Bao.Addr,
		AuthMount:  a.cfg.Bao.AuthMount,
		Role:       a.cfg.Bao.Role,
		KVMount:    a.cfg.Bao.KVMount,
		Namespace:  a.cfg.Bao.Namespace,
		CAFile:     a.cfg.Bao.CAFile,
		EnvID:      a.cfg.EnvID,
		HTTPClient: a.opts.BaoHTTP,
		Logger:     a.log,
		Secrets:    a.red,
	})
	if err != nil {
		return &Error{Op: "OpenBao client", Code: codes.ConfigInvalid, Err: err}
	}
	a.bao = bcl
	return nil
}

// Close releases the transport (and the OpenZiti context of the sdk transport) and
// the idle connections to OpenBao.
func (a *Agent) Close() error {
	if a.bao != nil {
		a.bao.CloseIdleConnections()
	}
	var errs []error
	for _, c := range a.closers {
		errs = append(errs, c())
	}
	a.closers = nil
	return errors.Join(errs...)
}

func (a *Agent) now() time.Time { return a.opts.Now() }

// expect is what Verify and ReadStaged need of the box's config.
func (a *Agent) expect() bundle.Expect {
	return bundle.Expect{AllowPrivileged: slices.Clone(a.cfg.Compose.AllowPrivileged), ProjectName: a.cfg.Compose.Project}
}

// waitOptions is the health wait of an apply or a restore.
func (a *Agent) waitOptions(services []string) compose.WaitOptions {
	return compose.WaitOptions{Services: services, Timeout: time.Duration(a.cfg.Compose.HealthTimeout), Poll: a.opts.HealthPoll}
}

// dockerEnvNames are the variables DockerEnv passes on: the ones the docker CLI itself
// reads to find and reach the engine (and PATH, HOME to find its plugins and its
// config). No fake's variable is among them: a fake docker learns its paths another
// way (docs/FAKES.md).
var dockerEnvNames = []string{
	"PATH", "HOME", "DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "DOCKER_CERT_PATH",
	"DOCKER_TLS_VERIFY", "DOCKER_API_VERSION",
}

// DockerEnvNames returns the names of the variables DockerEnv passes on, in a new
// slice.
func DockerEnvNames() []string { return slices.Clone(dockerEnvNames) }

// DockerEnv returns the environment docker compose runs with, built from the agent's
// own environ ("K=V", as os.Environ returns it): only the variables named by
// DockerEnvNames pass, the last one winning when a name repeats, and nothing else —
// compose interpolates from its environment, and what the agent verified must be what
// compose runs (a VAULT_TOKEN or a stray DB_PASSWORD of the agent's own environment
// never reaches a container). Without PATH in environ, DefaultDockerEnv's PATH is
// used. The result is meant for Options.DockerEnv; the agent binary builds it from its
// process environment.
func DockerEnv(environ []string) []string {
	vals := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && slices.Contains(dockerEnvNames, k) {
			vals[k] = v
		}
	}
	env := []string{}
	for _, k := range dockerEnvNames {
		if v, ok := vals[k]; ok {
			env = append(env, k+"="+v)
		}
	}
	if _, ok := vals["PATH"]; !ok {
		env = append(env, DefaultDockerEnv()...)
	}
	return env
}

// composeFor returns a compose client for the release of sha, whose manifest names
// the compose files. The project directory is the release's real path, not
// `current`: a changed bind-mounted file then has a new source path, so compose
// recreates exactly the containers that use it. The agent's labels file comes last
// (release.Store.ComposeFiles): it makes compose recreate the containers whose
// configs or secrets changed.
func (a *Agent) composeFor(sha string, files []string) (*compose.Client, error) {
	return compose.New(compose.Config{
		Docker:  a.cfg.Compose.Docker,
		Project: a.cfg.Compose.Project,
		Dir:     a.store.Dir(sha),
		Files:   a.store.ComposeFiles(sha, files),
		Env:     a.opts.DockerEnv,
		Logger:  a.log,
		Reader:  a.reader(),
	})
}

// learnReleaseSecrets registers the secret values in the .env of a staged release with
// the redactor. A tick that resumes, restores or takes down a release read none of
// them from OpenBao, yet compose's output and the containers' logs may print them.
func (a *Agent) learnReleaseSecrets(sha string, m bundle.Manifest) {
	if len(m.Secrets) == 0 {
		return
	}
	values, err := a.store.EnvValues(sha, slices.Sorted(maps.Keys(m.Secrets)))
	if err != nil {
		a.log.Warn("could not read the release's .env to redact its secrets from compose's output",
			"path", filepath.Join(a.store.Dir(sha), bundle.EnvFileName), "err", err)
		return
	}
	for _, v := range values {
		a.red.Add(v)
	}
}

// readDockerVersion asks the Engine API, or docker version.
func (a *Agent) readDockerVersion(ctx context.Context) (string, error) {
	if a.engine != nil {
		v, err := a.engine.Version(ctx)
		if err == nil && !compose.ValidServerVersion(v) {
			return "", fmt.Errorf("the docker engine answered a server version that is not one (%d bytes)", len(v))
		}
		return v, err
	}
	cc, err := a.dockerCLI()
	if err != nil {
		return "", err
	}
	return cc.DockerVersion(ctx)
}

// dockerCLI returns a client of the docker CLI for what belongs to no release (the
// version, image pulls), run in deploy_dir (or its nearest existing parent).
func (a *Agent) dockerCLI() (*compose.Client, error) {
	return compose.New(compose.Config{Docker: a.cfg.Compose.Docker, Project: a.cfg.Compose.Project,
		Dir: fsutil.ExistingParent(a.cfg.DeployDir), Env: a.opts.DockerEnv, Logger: a.log})
}

// bearer is the tenancy client's token source: the stored OpenBao token.
func (a *Agent) bearer(context.Context) (secret.Value, error) {
	tok, err := a.readToken()
	if err != nil {
		return secret.Value{}, err
	}
	if tok.IsZero() {
		return secret.Value{}, &Error{Op: "tenancy bearer", Code: codes.Unauthenticated,
			Err: fmt.Errorf("%w: no token at %s", ErrNoCredentials, a.cfg.TokenPath())}
	}
	return tok, nil
}

// readToken reads the OpenBao token file (ReadToken) and registers the token with the
// agent's redactor.
func (a *Agent) readToken() (secret.Value, error) {
	tok, err := ReadToken(a.cfg)
	if err != nil {
		return secret.Value{}, err
	}
	a.red.Add(tok.Reveal())
	return tok, nil
}

// writeToken stores tok in the token file, atomically with mode 0600.
func (a *Agent) writeToken(tok secret.Value) error {
	if err := fsutil.WriteFileAtomic(a.cfg.TokenPath(), []byte(tok.Reveal()+"\n"), 0o600); err != nil {
		return fmt.Errorf("write token file %s: %w", a.cfg.TokenPath(), err)
	}
	return nil
}
