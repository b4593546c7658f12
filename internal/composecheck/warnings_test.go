package composecheck

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Compose's own warnings name the bundle's file, never the internal load path, and
// come back in Result.Warnings on every Check (not once per process).
func TestCheckWarnings(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		order []string
		want  []string
	}{
		{name: "obsolete version", files: map[string]string{"compose.yaml": "version: \"3.8\"\nservices:\n  app:\n    image: x\n"},
			want: []string{"compose.yaml: the attribute `version` is obsolete, it will be ignored, please remove it to avoid potential confusion"}},
		{name: "obsolete version in a file of a subdirectory", files: map[string]string{"deploy/compose.prod.yaml": "version: '2'\nservices:\n  app:\n    image: x\n"},
			want: []string{"deploy/compose.prod.yaml: the attribute `version` is obsolete, it will be ignored, please remove it to avoid potential confusion"}},
		{name: "external.name", files: map[string]string{"compose.yaml": "services:\n  app:\n    image: x\n    networks: [front]\nnetworks:\n  front:\n    external:\n      name: proxy\n"},
			want: []string{"compose.yaml: networks.front: external.name is deprecated. Please set name and external: true"}},
		{name: "two files", order: []string{"a.yaml", "b.yaml"}, files: map[string]string{
			"a.yaml": "version: '3'\nservices:\n  app:\n    image: x\n", "b.yaml": "version: '3'\nservices:\n  app:\n    image: y\n"},
			want: []string{
				"a.yaml: the attribute `version` is obsolete, it will be ignored, please remove it to avoid potential confusion",
				"b.yaml: the attribute `version` is obsolete, it will be ignored, please remove it to avoid potential confusion"}},
		{name: "none", files: map[string]string{"compose.yaml": "services:\n  app:\n    image: x\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			order := tc.order
			if order == nil {
				for name := range tc.files {
					order = append(order, name)
				}
			}
			in := Input{Files: map[string][]byte{}, ComposeFiles: order, Vars: map[string]string{}}
			for name, c := range tc.files {
				in.Files[name] = []byte(c)
				in.BundleFiles = append(in.BundleFiles, name)
			}
			var logged bytes.Buffer
			std := logrus.StandardLogger()
			prev := std.Out
			std.SetOutput(&logged)
			defer std.SetOutput(prev)
			for range 2 { // every Check reports them, not only the first of the process
				r := Check(context.Background(), in)
				require.Empty(t, r.Findings)
				assert.Equal(t, tc.want, r.Warnings)
			}
			// Whatever compose-go logs names the bundle's file, not the load path.
			assert.NotContains(t, logged.String(), ReleaseDir)
			if strings.Contains(logged.String(), "obsolete") {
				assert.Contains(t, logged.String(), tc.want[0][:strings.Index(tc.want[0], ":")])
			}
		})
	}
}
