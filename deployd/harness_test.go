package deployd_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakestack"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/testbox"
)

// The tests of a box (or of anything else that waits) call t.Parallel: every box has
// its own directory, fakes and fake docker, and the agent reads no process state. A
// test that runs in a few milliseconds stays serial, as it would gain nothing.

// box is one box under test (testbox.Box: the fakes, the fake docker, a config built
// from DefaultConfig in a temporary directory) with an in-process agent whose log goes
// to the box's Logs.
type box struct {
	*testbox.Box
	agent *deployd.Agent
	// rt, when set, sees every request to tenancy before it is sent and may rewrite
	// the response.
	rt  *hookTransport
	now func() time.Time
}

type boxOptions struct {
	env     string
	script  *fakedocker.Script
	stack   *fakestack.Options
	noGrant bool
	// config, when set, changes the box's config before the agent is built.
	config func(*deployd.Config)
	// now is the clock of the agent (and, through stack, of the fakes).
	now func() time.Time
}

func newBox(t *testing.T, o boxOptions) *box {
	t.Helper()
	b := &box{Box: testbox.New(t, testbox.Options{Env: o.env, Script: o.script, Stack: o.stack, NoGrant: o.noGrant, Config: o.config})}
	b.rt = &hookTransport{base: http.DefaultTransport.(*http.Transport).Clone()}
	b.now = o.now
	b.newAgent()
	return b
}

func (b *box) newAgent() {
	b.T.Helper()
	if b.agent != nil {
		_ = b.agent.Close()
	}
	b.agent = b.NewAgent(deployd.Options{TenancyHTTP: &http.Client{Transport: b.rt}, HealthPoll: 10 * time.Millisecond, Now: b.now})
}

func (b *box) tick() (deployd.Outcome, int) {
	b.T.Helper()
	return b.Tick(b.agent)
}

// tickExits runs a tick that must end with exit; it returns the outcome.
func (b *box) tickExits(exit int) deployd.Outcome {
	b.T.Helper()
	out, code := b.tick()
	require.Equal(b.T, exit, code, "%+v\n%s", out, b.Logs.String())
	return out
}

// tickEnds runs a tick that must end with exit and code; it returns the outcome.
func (b *box) tickEnds(exit int, code codes.Code) deployd.Outcome {
	b.T.Helper()
	out := b.tickExits(exit)
	require.Equal(b.T, code, out.Code)
	return out
}

// tickApplied runs a tick that must end 0 with the result applied; it returns the
// outcome.
func (b *box) tickApplied() deployd.Outcome {
	b.T.Helper()
	out := b.tickExits(deployd.ExitOK)
	require.Equal(b.T, "applied", out.Result)
	return out
}

// scriptRelease scripts the states docker shows for service of the release sha.
func (b *box) scriptRelease(sha, service string, states ...fakedocker.State) {
	b.T.Helper()
	require.NoError(b.T, b.Docker.SetScript(&fakedocker.Script{Releases: map[string]map[string]fakedocker.Service{sha: {service: {States: states}}}}))
}

// editState changes state.json as a hand or an older agent would: edit gets it as
// decoded JSON.
func (b *box) editState(edit func(raw map[string]any)) {
	b.T.Helper()
	data, err := os.ReadFile(b.Cfg.StatePath())
	require.NoError(b.T, err)
	var raw map[string]any
	require.NoError(b.T, json.Unmarshal(data, &raw))
	edit(raw)
	data, err = json.Marshal(raw)
	require.NoError(b.T, err)
	require.NoError(b.T, os.WriteFile(b.Cfg.StatePath(), data, 0o600))
}

func projectDir(argv []string) string {
	for i, a := range argv {
		if a == "--project-directory" && i+1 < len(argv) {
			return argv[i+1]
		}
	}
	return ""
}

// hookTransport lets a test rewrite tenancy's answers: after(req, resp) may replace
// the response.
type hookTransport struct {
	base  http.RoundTripper
	mu    sync.Mutex
	after func(*http.Request, *http.Response) *http.Response
}

func (h *hookTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := h.base.RoundTrip(req)
	h.mu.Lock()
	after := h.after
	h.mu.Unlock()
	if err != nil || after == nil {
		return resp, err
	}
	return after(req, resp), nil
}

func (h *hookTransport) set(f func(*http.Request, *http.Response) *http.Response) {
	h.mu.Lock()
	h.after = f
	h.mu.Unlock()
}

// rawTar builds a tar from entries, for bundles a BundleSpec cannot express.
type entry struct {
	hdr  tar.Header
	body string
}

func rawTar(t *testing.T, manifest map[string]any, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	mj, err := json.Marshal(manifest)
	require.NoError(t, err)
	all := append([]entry{{hdr: tar.Header{Name: "manifest.json", Typeflag: tar.TypeReg, Mode: 0o644}, body: string(mj)}}, entries...)
	for _, e := range all {
		h := e.hdr
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		require.NoError(t, w.WriteHeader(&h))
		if h.Typeflag == tar.TypeReg {
			_, err := io.WriteString(w, e.body)
			require.NoError(t, err)
		}
	}
	require.NoError(t, w.Close())
	return buf.Bytes()
}

// idleTick runs a tick with nothing to do (desired "none") and requires it to succeed:
// afterwards the box has bootstrapped and holds a token.
func (b *box) idleTick() {
	b.T.Helper()
	b.SetDesired(faketenancy.Desired{Action: "none"})
	b.tickExits(deployd.ExitOK)
}

// idleBox is a box that has bootstrapped: one tick with nothing to do (idleTick).
func idleBox(t *testing.T) *box {
	t.Helper()
	b := newBox(t, boxOptions{})
	b.idleTick()
	return b
}

// liveBox is a box serving the sample app of serial 1; it returns the release's sha.
func liveBox(t *testing.T) (*box, string) {
	t.Helper()
	b := newBox(t, boxOptions{})
	return b, b.applySample(1)
}

// lastLive returns the live object of the box's last check-in; the box must have sent
// one.
func (b *box) lastLive() faketenancy.Live {
	b.T.Helper()
	live, ok := b.Stack.Tenancy.LastLive(b.Env)
	require.True(b.T, ok, "no check-in carried a live object")
	return live
}

// apply publishes bn and runs a tick that must apply it; it returns the bundle's sha.
func (b *box) apply(bn faketenancy.BundleSpec) string {
	b.T.Helper()
	sha := b.Publish(bn)
	b.tickExits(deployd.ExitOK)
	return sha
}

// tickApplies runs a tick that must apply sha: exit 0, sha live, and leases leases
// granted to the box in all.
func (b *box) tickApplies(sha string, leases int) {
	b.T.Helper()
	b.tickExits(deployd.ExitOK)
	assert.Equal(b.T, sha, b.Live())
	assert.Equal(b.T, leases, b.Leases())
}

// applySample applies the sample app of serial; it returns the bundle's sha.
func (b *box) applySample(serial int64) string {
	b.T.Helper()
	return b.apply(faketenancy.SampleApp(b.Env, serial))
}

// privilegedCompose is a compose file the agent refuses with PRIVILEGED.
const privilegedCompose = "services:\n  web:\n    image: nginx\n    privileged: true\n"

// refusePrivileged publishes the sample app of serial 1 with privilegedCompose and runs
// a tick that must refuse it: exit 1, PRIVILEGED. It returns the bundle's sha.
func (b *box) refusePrivileged() string {
	b.T.Helper()
	bn := faketenancy.SampleApp(b.Env, 1)
	bn.Files["compose.yaml"] = privilegedCompose
	sha := b.Publish(bn)
	b.tickEnds(deployd.ExitFailed, codes.Privileged)
	return sha
}

// refuseRollback applies the sample app of serial 5, then publishes that of serial 3
// and runs a tick that must refuse it, as tenancy did not ask for a rollback: exit 1,
// ROLLBACK. It returns the sha of serial 3.
func (b *box) refuseRollback() string {
	b.T.Helper()
	b.applySample(5)
	older := b.Publish(faketenancy.SampleApp(b.Env, 3))
	b.tickEnds(deployd.ExitFailed, codes.Rollback)
	return older
}
