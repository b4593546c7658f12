package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

func TestRun(t *testing.T) {
	const bearer = "hvs.floor-test-bearer"
	var got faketenancy.CheckinRequest // the body as the fake tenancy reads it
	var gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&got) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if got.EnvID == "env-refused" {
			w.WriteHeader(http.StatusConflict)
			return
		}
		_, _ = io.WriteString(w, `{"action":"none","next_checkin_s":60}`)
	}))
	t.Cleanup(srv.Close)
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(bearer+"\n"), 0o600))

	tests := []struct {
		name string
		args []string
		want int
	}{
		{"ok", []string{"-url", srv.URL, "-token-file", tokenFile, "-env", "env-dev-01"}, 0},
		{"refused", []string{"-url", srv.URL, "-token-file", tokenFile, "-env", "env-refused"}, 1},
		{"no token file", []string{"-url", srv.URL, "-token-file", tokenFile + ".missing", "-env", "env-dev-01"}, 1},
		{"missing flag", []string{"-url", srv.URL, "-env", "env-dev-01"}, 2},
		{"stray argument", []string{"-url", srv.URL, "-token-file", tokenFile, "-env", "env-dev-01", "x"}, 2},
		{"unknown flag", []string{"-nope"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := run(t.Context(), tt.args, srv.Client().Transport, &stderr)
			assert.Equal(t, tt.want, code, "stderr: %s", stderr.String())
			assert.NotContains(t, stderr.String(), bearer)
		})
	}
	// The ok case's request, checked after the table (the server keeps the last one
	// it decoded, so run it again).
	require.Equal(t, 0, run(t.Context(), tests[0].args, srv.Client().Transport, io.Discard))
	assert.Equal(t, "Bearer "+bearer, gotAuth)
	assert.Equal(t, "env-dev-01", got.EnvID)
	assert.Len(t, got.CurrentSHA, 64)
	assert.NotEmpty(t, got.Host.DockerVersion)
}
