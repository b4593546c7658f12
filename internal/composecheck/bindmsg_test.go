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
	const plex = "service plex: volumes: bind mount "
	from := func(at, v string) []string {
		return []string{plex + "from outside the release at " + at + ": its source comes from ${" + v + "}"}
	}
	tests := []struct {
		name    string
		volumes string
		want    []string
	}{
		{"source from a variable", "      - ${PLEX_MEDIA_PATH}:/data\n", from("/data", "PLEX_MEDIA_PATH")},
		{"source from $VAR with a suffix", "      - $PLEX_MEDIA_PATH/movies:/movies:ro\n", from("/movies", "PLEX_MEDIA_PATH")},
		{"source from a variable with a default", "      - ${MEDIA:-/srv/media}:/media\n", from("/media", "MEDIA")},
		{"long syntax from a variable", "      - type: bind\n        source: ${PLEX_MEDIA_PATH}\n        target: /data/\n", from("/data/", "PLEX_MEDIA_PATH")},
		{"home directory", "      - ~/plex/config:/config\n", []string{plex + "of a home directory (~) at /config, outside the release"}},
		{"home directory, long syntax", "      - type: bind\n        source: ~/plex\n        target: /plex\n", []string{plex + "of a home directory (~) at /plex, outside the release"}},
		{"target from a variable", "      - /srv/media:${MOUNT_AT:-/media}\n", []string{plex + "from outside the release at ${MOUNT_AT:-/media}"}},
		{"absolute source", "      - /srv/media:/media\n", []string{plex + "from outside the release at /media"}},
		{"docker socket", "      - /var/run/docker.sock:/var/run/docker.sock\n", []string{plex + "of the docker socket at /var/run/docker.sock"}},
		{"release directory", "      - .:/app\n",
			[]string{plex + "of the release directory or its .env at /app exposes every secret of the environment; mount a subdirectory"}},
		{"inside the release", "      - ${CONF_DIR}:/conf\n", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := composeInput("services:\n  plex:\n    image: x\n    volumes:\n"+tc.volumes, nil)
			in.Vars = map[string]string{"PLEX_MEDIA_PATH": planted, "CONF_DIR": "./conf", "MEDIA": planted}
			r := Check(context.Background(), in)
			assert.Equal(t, tc.want, privilegedDetails(r), "findings: %v", r.Findings)
			for _, f := range r.Findings {
				assert.NotContains(t, f.Detail, planted)
			}
		})
	}
}
