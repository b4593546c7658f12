package deployd_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/fakes/fakedocker"
)

// TestReadsTheDockerContext: after `docker context use` (the CLI's currentContext in
// $DOCKER_CONFIG/config.json, no DOCKER_HOST), the agent reads the daemon of that
// context, which is the one compose changes: here the fake engine, named only by the
// context's meta.json. Were the context ignored, the reads would go to
// /var/run/docker.sock and the live health would not be the fake's.
func TestReadsTheDockerContext(t *testing.T) {
	b := newBox(t, boxOptions{})
	cfgDir := filepath.Join(b.Dir, "docker-config")
	sum := sha256.Sum256([]byte("laptop"))
	metaDir := filepath.Join(cfgDir, "contexts", "meta", hex.EncodeToString(sum[:]))
	require.NoError(t, os.MkdirAll(metaDir, 0o700))
	meta := `{"Name":"laptop","Metadata":{},"Endpoints":{"docker":{"Host":"` + b.Docker.DockerHost() + `","SkipTLSVerify":false}}}`
	require.NoError(t, os.WriteFile(filepath.Join(metaDir, "meta.json"), []byte(meta), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(cfgDir, "config.json"), []byte(`{"currentContext":"laptop"}`), 0o600))

	var env []string
	for _, kv := range b.Docker.Env() {
		if !strings.HasPrefix(kv, "DOCKER_HOST=") {
			env = append(env, kv)
		}
	}
	b.agent = b.NewAgent(deployd.Options{DockerEnv: append(env, "DOCKER_CONFIG="+cfgDir), HealthPoll: 10 * time.Millisecond})
	b.Publish(faketenancy.SampleApp(b.Env, 1))
	_, code := b.tick()
	require.Equal(t, deployd.ExitOK, code, b.Logs.String())
	b.idleTick()

	live, ok := b.Stack.Tenancy.LastLive(b.Env)
	require.True(t, ok)
	require.NotNil(t, live.Healthy, "live %+v", live)
	assert.True(t, *live.Healthy)
	engine := 0
	for _, c := range b.Docker.Calls() {
		if c.Argv[0] == fakedocker.EngineArgv0 {
			engine++
		}
		assert.False(t, c.Argv[0] == "inspect" || slices.Contains(c.Argv, "ps"),
			"docker %v: the reads go through the Engine API of the context's daemon, not the CLI", c.Argv)
	}
	assert.Positive(t, engine, "the context's daemon (the fake engine) was read")
}
