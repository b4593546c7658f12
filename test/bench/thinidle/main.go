// Command thinidle measures a design, not a feature: what the timer's idle tick would
// cost as a process that links only the light packages (deployd/tenancy,
// internal/engine, deployd/compose, a YAML decoder, net/http) instead of the whole
// agent, whose package initialisation (compose-go's JSON-schema compiler, the
// OpenZiti SDK, the OpenBao client) is most of an idle tick (docs/BENCHMARKS.md,
// "Reading the idle tick"). It does the idle tick's work against the agent's own
// config and state — lock, state, token lookup-self, the live release's health through
// the Engine API, the check-in with its live object, state saved with fsync — and
// nothing else: no repair, no apply, no latch, no metrics. BenchmarkThinIdleTick runs
// it as a process next to the floor. The agent does not use it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/engine"
)

type config struct {
	EnvID     string `yaml:"env_id"`
	DeployDir string `yaml:"deploy_dir"`
	StateDir  string `yaml:"state_dir"`
	Tenancy   struct {
		URL string `yaml:"url"`
	} `yaml:"tenancy"`
	Bao struct {
		Addr string `yaml:"addr"`
	} `yaml:"bao"`
	Compose struct {
		Project string `yaml:"project"`
	} `yaml:"compose"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: thinidle CONFIG")
		os.Exit(2)
	}
	if err := run(context.Background(), os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "thinidle:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, path string) error {
	var cfg config
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(cfg.StateDir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = lock.Close() }()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return err
	}
	statePath := filepath.Join(cfg.StateDir, "state.json")
	var st map[string]any
	if data, err = os.ReadFile(statePath); err != nil {
		return err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return err
	}
	tok, err := os.ReadFile(filepath.Join(cfg.StateDir, "bao.token"))
	if err != nil {
		return err
	}
	token := strings.TrimSpace(string(tok))
	if err := lookupSelf(ctx, cfg.Bao.Addr, token); err != nil {
		return err
	}
	live, err := observe(ctx, cfg, st)
	if err != nil {
		return err
	}
	tc, err := tenancy.New(tenancy.Config{BaseURL: cfg.Tenancy.URL, HTTPClient: &http.Client{},
		Token: func(context.Context) (secret.Value, error) { return secret.New(token), nil }})
	if err != nil {
		return err
	}
	sha, _ := st["live_sha"].(string)
	ins, err := tc.Checkin(ctx, tenancy.Checkin{EnvID: cfg.EnvID, AgentVersion: "thinidle", CurrentSHA: sha, Live: live})
	if err != nil {
		return err
	}
	if ins.Action != tenancy.ActionNone {
		return fmt.Errorf("action %s: the thin process would hand over to the agent here", ins.Action)
	}
	st["last_checkin"] = time.Now().UTC()
	return writeFsync(statePath, st)
}

// lookupSelf is the token upkeep's lookup-self, as plain HTTP.
func lookupSelf(ctx context.Context, addr, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(addr, "/")+"/v1/auth/token/lookup-self", nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Vault-Token", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("lookup-self: HTTP %d", resp.StatusCode)
	}
	return nil
}

// observe is the live release's health through the Engine API (DOCKER_HOST).
func observe(ctx context.Context, cfg config, st map[string]any) (*tenancy.Live, error) {
	if st["live_sha"] == nil {
		return nil, errors.New("nothing is live: the benchmark needs a live release")
	}
	ec, err := engine.New(os.Environ(), engine.Options{})
	if err != nil {
		return nil, err
	}
	defer func() { _ = ec.Close() }()
	cc, err := compose.New(compose.Config{Project: cfg.Compose.Project, Dir: cfg.DeployDir, Reader: ec})
	if err != nil {
		return nil, err
	}
	obs, err := cc.Observe(ctx, nil, nil)
	if err != nil {
		return nil, err
	}
	l := &tenancy.Live{ObservedAt: obs.At, Healthy: obs.Healthy}
	for _, s := range obs.Services {
		l.Services = append(l.Services, tenancy.LiveService{Name: s.Name, State: s.State, Health: s.Health, ExitCode: s.ExitCode, Restarts: s.Restarts})
	}
	return l, nil
}

// writeFsync replaces path as the agent does: temp file, fsync, rename, fsync the
// directory.
func writeFsync(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".thin.tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}
