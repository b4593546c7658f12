package deployd_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/testbox"
)

// TestResumeRedactsTheReleaseSecrets: a tick that resumes a release promoted by an
// earlier (crashed) process has read no secret from OpenBao; the values in the
// release's .env must still be redacted from the report's tail and the log.
func TestResumeRedactsTheReleaseSecrets(t *testing.T) {
	t.Parallel()
	b, sha := liveBox(t)

	// What a kill between promote and health leaves: the live release unconfirmed.
	st := b.State()
	st.Confirmed = false
	data, err := json.Marshal(st)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(b.Cfg.StatePath(), data, 0o600))
	b.newAgent() // a new process: its redactor knows nothing yet
	leases := b.TenancyCalls("/v1/agent/lease")
	out, rep := b.failPrintingTheSecret("up")
	assert.Equal(t, sha, out.SHA)
	assert.Equal(t, leases, b.TenancyCalls("/v1/agent/lease"), "a resume takes no lease")
	require.Equal(t, "APPLY_FAILED", rep.Code)
}

// TestDownRedactsTheReleaseSecrets: a down runs in a process that read no secret; a
// compose down that prints a value of the release's .env must not carry it into the
// report's tail.
func TestDownRedactsTheReleaseSecrets(t *testing.T) {
	t.Parallel()
	b, _ := liveBox(t)
	b.newAgent()
	b.SetDesired(faketenancy.Desired{Action: "down"})
	out, _ := b.failPrintingTheSecret("down")
	assert.Equal(t, "failed", out.Result)
}

// failPrintingTheSecret makes docker's command fail printing the value of the box's
// secret (as compose prints a bad value of the release's .env) and runs a tick that
// must fail: the report's tail carries the error but not the value, nor does the log.
// It returns the tick's outcome and the report.
func (b *box) failPrintingTheSecret(command string) (deployd.Outcome, faketenancy.Report) {
	b.T.Helper()
	require.NoError(b.T, b.Docker.SetScript(&fakedocker.Script{Commands: map[string]fakedocker.Command{
		command: {Stderr: "Error: invalid value " + testbox.DefaultSecret + " for DB_PASSWORD\n", Exit: 1},
	}}))
	out := b.tickExits(deployd.ExitFailed)
	rep := b.LastReport()
	require.Contains(b.T, rep.Tail, "Error: invalid value")
	assert.NotContains(b.T, rep.Tail, testbox.DefaultSecret)
	assert.NotContains(b.T, b.Logs.String(), testbox.DefaultSecret)
	return out, rep
}

// TestComposeOutputIsLoggedRedacted: what compose up prints reaches the log line by
// line as it comes, also when up succeeds, with every secret value masked.
func TestComposeOutputIsLoggedRedacted(t *testing.T) {
	t.Parallel()
	const value = "s3cr3t-db-password"
	b := newBox(t, boxOptions{script: &fakedocker.Script{Commands: map[string]fakedocker.Command{
		"up": {Stdout: "web Pulling\nweb Pulled\n", Stderr: "warning: DB_PASSWORD=" + value + "\n"},
	}}})
	b.applySample(1)
	logs := b.Logs.String()
	assert.Contains(t, logs, `"msg":"docker compose up","env_id":"env-dev-01","project":"monky","output":"web Pulling"`)
	assert.Contains(t, logs, `"output":"web Pulled"`)
	assert.Contains(t, logs, `"output":"warning: DB_PASSWORD=`)
	assert.NotContains(t, logs, value)
}
