package testbox_test

import (
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/testbox"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

func TestMain(m *testing.M) { os.Exit(testprog.Run(m)) }

// TestWriteConfig: a variant config leaves the box's own as it was.
func TestWriteConfig(t *testing.T) {
	b := testbox.New(t, testbox.Options{NoGrant: true})
	p := b.WriteConfig("other.yaml", func(c *deployd.Config) { c.Compose.KeepReleases = 7 })
	c, err := deployd.LoadConfig(p)
	require.NoError(t, err)
	assert.Equal(t, 7, c.Compose.KeepReleases)
	assert.Equal(t, 2, b.Cfg.Compose.KeepReleases)
	assert.Empty(t, b.Grants)
	assert.NoFileExists(t, b.Cfg.BootstrapGrant)
}

// TestSkipIfShort: under -short, SkipIfShort, Build (testprog's, re-exported) and
// Box.Start skip the test that asks for a program, before they build or run anything;
// without -short nothing skips.
func TestSkipIfShort(t *testing.T) {
	was := flag.Lookup("test.short").Value.String()
	t.Cleanup(func() { require.NoError(t, flag.Set("test.short", was)) })
	require.NoError(t, flag.Set("test.short", "true"))
	for name, ask := range map[string]func(t *testing.T){
		"SkipIfShort": func(t *testing.T) { testprog.SkipIfShort(t) },
		"Build":       func(t *testing.T) { testprog.Build(t, "github.com/monky/monky-deployd/test/engine/testapp") },
		"Box.Start":   func(t *testing.T) { testbox.New(t, testbox.Options{}).Start([]string{"version"}) },
	} {
		var skipped, went bool
		t.Run(name, func(t *testing.T) {
			defer func() { skipped = t.Skipped() }()
			ask(t)
			went = true
		})
		assert.True(t, skipped, "%s skips under -short", name)
		assert.False(t, went, "%s ends the test", name)
	}
	require.NoError(t, flag.Set("test.short", "false"))
	var went bool
	t.Run("not short", func(t *testing.T) {
		testprog.SkipIfShort(t)
		went = true
	})
	assert.True(t, went, "without -short the test goes on")
	assert.False(t, testing.Short())
}

// TestNewBox: the config file reads back as the box's config, the grant is placed, the
// box's directories are its own, and an in-process tick applies a published bundle.
// Then (not under -short) DOCKER_HOST: the in-process agent and the agent binary both
// give it to docker, and it names the fake engine of the box's docker, which answers
// from the same state as the fake docker program.
func TestNewBox(t *testing.T) {
	b := testbox.New(t, testbox.Options{Config: func(c *deployd.Config) { c.Compose.Project = "testbox" }})
	c, err := deployd.LoadConfig(b.CfgPath)
	require.NoError(t, err)
	assert.Equal(t, b.Cfg, c)
	assert.Equal(t, "testbox", c.Compose.Project)
	assert.Equal(t, testbox.DefaultEnv, c.EnvID)
	assert.True(t, strings.HasPrefix(c.StateDir, b.Dir))
	grant, err := os.ReadFile(c.BootstrapGrant)
	require.NoError(t, err)
	require.Len(t, b.Grants, 1)
	assert.Equal(t, b.Grants[0]+"\n", string(grant))
	require.NotEmpty(t, b.Docker.Socket)
	assert.Contains(t, b.ProcEnv(), "DOCKER_HOST=unix://"+b.Docker.Socket)

	sha := b.Publish(faketenancy.SampleApp(b.Env, 1))
	out, code := b.Tick(b.NewAgent(deployd.Options{HealthPoll: 10 * time.Millisecond}))
	require.Equal(t, deployd.ExitOK, code, out.Code)
	assert.Equal(t, sha, b.Live())
	assert.Equal(t, sha, b.State().LiveSHA)
	assert.Equal(t, "applied", b.LastReport().Result)
	assert.Equal(t, 1, b.Leases())
	assert.Equal(t, 1, b.TenancyCalls("/v1/agent/lease"))
	assert.Positive(t, b.BaoCalls("/db"))
	assert.Len(t, b.DockerCalls("up"), 1)
	assert.Equal(t, []string{sha}, b.Releases())
	inProcess := len(b.DockerCalls(""))
	require.Positive(t, inProcess)

	b.Publish(faketenancy.SampleApp(b.Env, 2))
	res := b.Run(60*time.Second, []string{"run", "--config", b.CfgPath})
	require.Equal(t, deployd.ExitOK, res.Code, res.Output())
	calls := b.DockerCalls("")
	require.Greater(t, len(calls), inProcess, "the binary ran docker")
	engine := 0
	for i, c := range calls {
		if c.Argv[0] == fakedocker.EngineArgv0 {
			engine++ // the agent reads through the engine: DOCKER_HOST named it
			continue
		}
		assert.Contains(t, c.Env, "DOCKER_HOST", "call %d (%s) got DOCKER_HOST; in-process before %d", i, strings.Join(c.Argv, " "), inProcess)
	}
	assert.Positive(t, engine, "the agents read through the fake engine")

	resp, err := b.Docker.HTTPClient().Get("http://docker/containers/json?all=1")
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	var list []struct{ Labels map[string]string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	require.NotEmpty(t, list, "the release the binary applied is up, seen through the engine")
	for _, c := range list {
		assert.Equal(t, b.Cfg.Compose.Project, c.Labels["com.docker.compose.project"])
	}
}

func TestReadProc(t *testing.T) {
	st, err := testbox.ReadProc(os.Getpid())
	require.NoError(t, err)
	assert.Positive(t, st.RSSMiB)
	assert.Positive(t, st.AnonMiB)
	assert.Less(t, st.AnonMiB, st.RSSMiB, "the resident set holds the anonymous memory and the executable's pages")
	assert.Positive(t, st.Threads)
	assert.Positive(t, st.FDs)

	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	_, err = testbox.ReadProc(cmd.Process.Pid)
	require.Error(t, err, "a process that has ended")
}
