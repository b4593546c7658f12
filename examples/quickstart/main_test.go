package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// TestMain: run as docker (the quickstart installs its own binary, here this test
// binary, as the fake docker), be the fake docker, as main does.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "docker" {
		fakedocker.Main()
	}
	os.Exit(m.Run())
}

// TestQuickstart walks the README's first command through, in-process: every step
// behaves as it says.
func TestQuickstart(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), &out, false, false), out.String())
	for _, want := range []string{
		"grant consumed: true",
		"-> action=apply result=applied",
		"-> action=none result=-",
		"refused: PRIVILEGED: service web: privileged is true",
		"leases taken for it: 0",
		"-> action=down result=down",
		"docker compose --project-name quickstart",
		"quickstart done",
	} {
		assert.Contains(t, out.String(), want)
	}
}

// TestExamplesImportOnlyPublicPackages: every example imports only public packages of
// this module, so that another module can write what it does.
func TestExamplesImportOnlyPublicPackages(t *testing.T) {
	const module = "github.com/monky/monky-deployd"
	out, err := exec.Command(testprog.GoTool(t), "list", "-f", `{{.ImportPath}}:{{range .Imports}} {{.}}{{end}}`, module+"/examples/...").Output()
	require.NoError(t, err)
	examples := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		examples++
		for _, imp := range strings.Fields(imports) {
			if strings.HasPrefix(imp, module+"/") && strings.Contains(imp+"/", "/internal/") {
				t.Errorf("%s imports %s: an example is what another module can write", pkg, imp)
			}
		}
		if pkg == module+"/examples/quickstart" {
			assert.Contains(t, strings.Fields(imports), module+"/deployd/deploydtest/fakestack", "go list read the quickstart's imports")
		}
	}
	assert.Positive(t, examples)
}
