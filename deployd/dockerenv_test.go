package deployd_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/monky/monky-deployd/deployd"
)

func TestDockerEnv(t *testing.T) {
	tests := []struct {
		name    string
		environ []string
		want    []string
	}{
		{
			name: "only the docker CLI's own variables pass, in a fixed order",
			environ: []string{
				"VAULT_TOKEN=hvs.x", "DOCKER_HOST=unix:///run/docker.sock", "HOME=/root",
				"PATH=/usr/bin:/bin", "DB_PASSWORD=s3cr3t", "FAKE_DOCKER_LOG=/tmp/log",
				"FAKE_DOCKER_STATE=/tmp/state", "FAKE_DOCKER_SCRIPT=/tmp/script", "COMPOSE_FILE=evil.yaml",
			},
			want: []string{"PATH=/usr/bin:/bin", "HOME=/root", "DOCKER_HOST=unix:///run/docker.sock"},
		},
		{
			name:    "without PATH, the default PATH",
			environ: []string{"HOME=/root"},
			want:    append([]string{"HOME=/root"}, deployd.DefaultDockerEnv()...),
		},
		{
			name:    "nothing",
			environ: nil,
			want:    deployd.DefaultDockerEnv(),
		},
		{
			name:    "the last of a repeated name wins; an empty value is kept",
			environ: []string{"PATH=/a", "DOCKER_CONTEXT=x", "PATH=/b", "DOCKER_CONTEXT=", "NOEQUALS"},
			want:    []string{"PATH=/b", "DOCKER_CONTEXT="},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, deployd.DockerEnv(tc.environ))
		})
	}
}

// TestDockerEnvNamesNoFake: the production allow-list names no fake's variable.
func TestDockerEnvNamesNoFake(t *testing.T) {
	names := deployd.DockerEnvNames()
	assert.Contains(t, names, "PATH")
	for _, n := range names {
		assert.False(t, strings.HasPrefix(n, "FAKE_"), n)
	}
	names[0] = "changed"
	assert.Equal(t, "PATH", deployd.DockerEnvNames()[0], "a copy")
}
