package composecheck

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A refused bind names where its source came from, never its value: the variable
// (${PLEX_MEDIA_PATH}) or a home directory (~); the target is shown as written.
func TestCheckBindMessages(t *testing.T) {
	const planted = "/mnt/planted-media-value"
	tests := []struct {
		name    string
		volumes string
		want    []string
	}{
		{"source from a variable", "      - ${PLEX_MEDIA_PATH}:/data\n",
			[]string{"service plex: volumes: bind mount from outside the release at /data: its source comes from ${PLEX_MEDIA_PATH}"}},
		{"source from $VAR with a suffix", "      - $PLEX_MEDIA_PATH/movies:/movies:ro\n",
			[]string{"service plex: volumes: bind mount from outside the release at /movies: its source comes from ${PLEX_MEDIA_PATH}"}},
		{"source from a variable with a default", "      - ${MEDIA:-/srv/media}:/media\n",
			[]string{"service plex: volumes: bind mount from outside the release at /media: its source comes from ${MEDIA}"}},
		{"long syntax from a variable", "      - type: bind\n        source: ${PLEX_MEDIA_PATH}\n        target: /data/\n",
			[]string{"service plex: volumes: bind mount from outside the release at /data/: its source comes from ${PLEX_MEDIA_PATH}"}},
		{"home directory", "      - ~/plex/config:/config\n",
			[]string{"service plex: volumes: bind mount of a home directory (~) at /config, outside the release"}},
		{"home directory, long syntax", "      - type: bind\n        source: ~/plex\n        target: /plex\n",
			[]string{"service plex: volumes: bind mount of a home directory (~) at /plex, outside the release"}},
		{"target from a variable", "      - /srv/media:${MOUNT_AT:-/media}\n",
			[]string{"service plex: volumes: bind mount from outside the release at ${MOUNT_AT:-/media}"}},
		{"absolute source", "      - /srv/media:/media\n",
			[]string{"service plex: volumes: bind mount from outside the release at /media"}},
		{"docker socket", "      - /var/run/docker.sock:/var/run/docker.sock\n",
			[]string{"service plex: volumes: bind mount of the docker socket at /var/run/docker.sock"}},
		{"release directory", "      - .:/app\n",
			[]string{"service plex: volumes: bind mount of the release directory or its .env at /app exposes every secret of the environment; mount a subdirectory"}},
		{"inside the release", "      - ${CONF_DIR}:/conf\n", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{
				Files:        map[string][]byte{"compose.yaml": []byte("services:\n  plex:\n    image: x\n    volumes:\n" + tc.volumes)},
				ComposeFiles: []string{"compose.yaml"},
				BundleFiles:  []string{"compose.yaml"},
				Vars:         map[string]string{"PLEX_MEDIA_PATH": planted, "CONF_DIR": "./conf", "MEDIA": planted},
			}
			r := Check(context.Background(), in)
			assert.Equal(t, tc.want, privilegedDetails(r), "findings: %v", r.Findings)
			for _, f := range r.Findings {
				assert.NotContains(t, f.Detail, planted)
			}
		})
	}
}
