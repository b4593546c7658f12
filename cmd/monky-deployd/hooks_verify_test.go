package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/testbox"
)

// TestVerifyHooks: verify refuses hooks naming a missing or a long-running service
// with HOOK_INVALID (what an apply does before its lease), and accepts valid ones.
func TestVerifyHooks(t *testing.T) {
	for _, tc := range []struct {
		name, service string
		code          int
		refusals      []string
	}{
		{"valid", "backup", 0, []string{}},
		{"missing service", "restore-db", 1, []string{"HOOK_INVALID"}},
		{"long-running service", "web", 1, []string{"HOOK_INVALID"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bn := faketenancy.SampleApp("env-dev-01", 1)
			bn.Files["compose.yaml"] += hookCompose
			bn.Restore = "unsafe"
			bn.Hooks = &faketenancy.HooksSpec{BeforeSwitch: []faketenancy.HookSpec{{Service: tc.service}}}
			p := filepath.Join(t.TempDir(), "bundle.tar.gz")
			require.NoError(t, os.WriteFile(p, testbox.Tarball(t, bn, true), 0o600))
			r := runMain(t, nil, "verify", "--env", "env-dev-01", "--json", p)
			assert.Equal(t, tc.code, r.Code, "stdout: %s stderr: %s", r.Stdout, r.Stderr)
			var v struct {
				Refusals []struct{ Code string } `json:"refusals"`
			}
			require.NoError(t, json.Unmarshal([]byte(r.Stdout), &v))
			got := []string{}
			for _, rf := range v.Refusals {
				got = append(got, rf.Code)
			}
			assert.Equal(t, tc.refusals, got)
		})
	}
}
