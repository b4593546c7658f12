package deployd_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// TestExplicitRollbackAfterARollbackRefusal: a sha refused with ROLLBACK (no
// rollback flag) is applied when tenancy then asks for it with rollback: true, the
// remedy docs/OPERATIONS.md names ("roll back explicitly from the console, which sets
// rollback"); the refusal was about the missing flag, not about the sha.
func TestExplicitRollbackAfterARollbackRefusal(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{})
	older := b.refuseRollback()

	b.SetDesired(faketenancy.Desired{Action: "apply", SHA: older, Rollback: true})
	b.tickApplied()
	assert.Equal(t, older, b.Live())

	// Without the flag, another refused sha stays remembered (no retry, no download).
	newer := b.Publish(faketenancy.SampleApp(b.Env, 2))
	b.tickExits(deployd.ExitFailed)
	downloads := b.TenancyCalls("/v1/agent/bundles/")
	b.SetDesired(faketenancy.Desired{Action: "apply", SHA: newer})
	b.tickEnds(deployd.ExitFailed, codes.Rollback)
	assert.Equal(t, downloads, b.TenancyCalls("/v1/agent/bundles/"), "a remembered failure is re-reported without a download")
}

func TestRestoreDegraded(t *testing.T) {
	for result, want := range map[string]bool{
		deployd.RestoreHealthy: false, deployd.RestoreNone: false,
		deployd.RestoreUnhealthy: true, deployd.RestoreFailed: true,
	} {
		assert.Equal(t, want, deployd.Restore{Result: result}.Degraded(), result)
	}
}

// TestDownReportNamesTheReleaseTakenDown: the report of a down carries the sha and
// serial of the release it took down (tenancy.Report's doc), and "" and 0 when nothing
// was live.
func TestDownReportNamesTheReleaseTakenDown(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{})
	sha := b.applySample(3)
	require.Equal(t, sha, b.Live())

	b.SetDesired(faketenancy.Desired{Action: "down"})
	out := b.tickExits(deployd.ExitOK)
	rep := b.LastReport()
	assert.Equal(t, "down", rep.Result)
	assert.Equal(t, sha, rep.SHA)
	assert.Equal(t, int64(3), rep.Serial)
	assert.Equal(t, sha, out.SHA)
	assert.Equal(t, int64(3), out.Serial)

	// Down again: nothing is live, the report names no release.
	out = b.tickExits(deployd.ExitOK)
	rep = b.LastReport()
	assert.Equal(t, "down", rep.Result)
	assert.Equal(t, "", rep.SHA)
	assert.Zero(t, rep.Serial)
	assert.Equal(t, "", out.SHA)
}

// TestRepairKeepsAReleaseCaughtMidRestage: restaging a kept release moves the old copy
// to releases/.<sha>.old before the new one is renamed into place. A crash between the
// two renames must not cost the box that release (it may be the previous one, the
// restore target): the next tick's repair puts it back.
func TestRepairKeepsAReleaseCaughtMidRestage(t *testing.T) {
	t.Parallel()
	b, first := liveBox(t)
	b.applySample(2)
	require.Equal(t, first, b.State().PreviousSHA)

	// The crash: the kept release was moved aside, the new copy not yet in place.
	rel := b.Cfg.ReleasesDir()
	require.NoError(t, os.Rename(filepath.Join(rel, first), filepath.Join(rel, "."+first+".old")))
	require.NoError(t, os.MkdirAll(filepath.Join(rel, "."+first+".tmp"), 0o755))

	b.idleTick()
	_, err := os.Stat(filepath.Join(rel, first, "manifest.json"))
	assert.NoError(t, err, "the previous release is back in place")
	for _, leftover := range []string{"." + first + ".old", "." + first + ".tmp"} {
		_, err := os.Stat(filepath.Join(rel, leftover))
		assert.True(t, os.IsNotExist(err), "%s removed", leftover)
	}
}

// TestConfigsGetTheLabelsFile: a release whose services mount compose configs gets
// the agent's labels file, passed to every compose call after the manifest's files
// (compose hashes a config by name only: docs/ARCHITECTURE.md "Configs and
// secrets"); a release without configs gets none, and compose sees its files alone.
func TestConfigsGetTheLabelsFile(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{})
	withConfigs := b.apply(faketenancy.BundleSpec{EnvID: b.Env, Serial: 1, Files: map[string]string{
		"compose.yaml": "services:\n  web:\n    image: nginx:1.27\n    configs: [app]\n  plain:\n    image: nginx:1.27\nconfigs:\n  app:\n    file: ./app.conf\n",
		"app.conf":     "listen = 1\n",
	}})
	labels, err := os.ReadFile(filepath.Join(b.Cfg.DeployDir, "releases", withConfigs, bundle.LabelsFileName))
	require.NoError(t, err)
	assert.Contains(t, string(labels), "\"web\":\n    labels:\n      monky.deployd.sources: ")
	assert.NotContains(t, string(labels), "plain")
	ups := b.DockerCalls("up")
	require.NotEmpty(t, ups)
	assert.Contains(t, strings.Join(ups[len(ups)-1].Argv, " "), "-f compose.yaml -f "+bundle.LabelsFileName+" up")

	without := b.applySample(2)
	_, err = os.Stat(filepath.Join(b.Cfg.DeployDir, "releases", without, bundle.LabelsFileName))
	require.ErrorIs(t, err, os.ErrNotExist)
	ups = b.DockerCalls("up")
	assert.NotContains(t, strings.Join(ups[len(ups)-1].Argv, " "), bundle.LabelsFileName)
}
