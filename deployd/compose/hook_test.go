package compose

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
)

// hookFixture is newFixture with a hook service behind the monky-hooks profile.
func hookFixture(t *testing.T, script *fakedocker.Script) fixture {
	t.Helper()
	f := newFixture(t, script)
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "compose.yaml"),
		[]byte(testCompose+"  backup:\n    image: busybox\n    profiles: [monky-hooks]\n"), 0o644))
	return f
}

func TestRunHook(t *testing.T) {
	t.Parallel()
	base := []string{"compose", "--project-name", "monky", "--project-directory", "DIR", "-f", "compose.yaml", "-f", "override.yaml"}
	for _, tc := range []struct {
		name   string
		script *fakedocker.Script
		exit   int
		err    bool
		out    string
	}{
		{name: "exit 0", script: &fakedocker.Script{Hooks: map[string]fakedocker.Hook{"backup": {Stdout: "dumped\n"}}}, out: "dumped\n"},
		{name: "exit 3", script: &fakedocker.Script{Hooks: map[string]fakedocker.Hook{"backup": {Stderr: "failed\n", Exit: 3}}}, exit: 3, err: true, out: "failed\n"},
		{name: "exit 75", script: &fakedocker.Script{Hooks: map[string]fakedocker.Hook{"backup": {Exit: ExitLater}}}, exit: ExitLater, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := hookFixture(t, tc.script)
			out, err := f.client.RunHook(t.Context(), "monky-hooks", "backup", "monky-hook-backup-1")
			assert.Equal(t, tc.exit, out.ExitCode)
			assert.Equal(t, tc.err, err != nil, "err: %v", err)
			assert.Equal(t, tc.out, out.String())
			calls := f.calls()
			require.Len(t, calls, 1)
			want := append(slices.Clone(base), "--profile", "monky-hooks", "run", "--rm", "--no-deps", "-T", "--name", "monky-hook-backup-1", "backup")
			want[4] = f.dir
			assert.Equal(t, want, calls[0].Argv)
			assert.Empty(t, f.status().Services, "a hook runs no compose up")
		})
	}
	t.Run("names that are not names", func(t *testing.T) {
		f := hookFixture(t, nil)
		for _, args := range [][3]string{{"monky-hooks", "-x", "n"}, {"monky-hooks", "backup", "--privileged"}, {"", "backup", "n"}} {
			_, err := f.client.RunHook(t.Context(), args[0], args[1], args[2])
			require.Error(t, err, "%q", args)
		}
		assert.Empty(t, f.calls(), "no docker call")
	})
	t.Run("a service without the profile does not run", func(t *testing.T) {
		f := hookFixture(t, nil)
		out, err := f.client.RunHook(t.Context(), "other", "backup", "n")
		require.Error(t, err)
		assert.Contains(t, out.String(), "no such service: backup")
	})
}

func TestRemoveContainer(t *testing.T) {
	t.Parallel()
	f := hookFixture(t, nil)
	require.NoError(t, f.client.RemoveContainer(t.Context(), "monky-hook-backup-1"), "no such container is not an error")
	calls := f.calls()
	require.Len(t, calls, 1)
	assert.Equal(t, []string{"rm", "-f", "--", "monky-hook-backup-1"}, calls[0].Argv)
	require.Error(t, f.client.RemoveContainer(t.Context(), "-f"))
	assert.Len(t, f.calls(), 1)
}
