package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/testbox"
	"github.com/monky/monky-deployd/internal/testbox/golden"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// mainResult is one in-process run of Main.
type mainResult = testprog.Result

// runMain runs Main in-process with env as the whole environment.
func runMain(t *testing.T, env []string, args ...string) mainResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := Main(ctx, args, env, &stdout, &stderr)
	return mainResult{Code: code, Stdout: stdout.String(), Stderr: stderr.String()}
}

// runMainExit is runMain, which must exit with code.
func runMainExit(t *testing.T, code int, env []string, args ...string) mainResult {
	t.Helper()
	r := runMain(t, env, args...)
	require.Equal(t, code, r.Code, "stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
	return r
}

// fixture bundles under testdata/bundles, rewritten with -update.
var fixtures = map[string]func(testing.TB) []byte{
	// good: the sample application, gzip-compressed.
	"good.tar.gz": func(t testing.TB) []byte { return testbox.Tarball(t, faketenancy.SampleApp("env-dev-01", 7), true) },
	// refused: privileged, the docker socket and an unset variable at once.
	"refused.tar": func(t testing.TB) []byte {
		bn := faketenancy.SampleApp("env-dev-01", 7)
		bn.Files["compose.yaml"] = "services:\n  web:\n    image: nginx:${NGINX_TAG}\n    privileged: true\n" +
			"    volumes:\n      - /var/run/docker.sock:/var/run/docker.sock\n"
		delete(bn.Files, "config/app.toml")
		return testbox.Tarball(t, bn, false)
	},
	// obsolete-version: accepted, but compose-go warns through logrus about `version`.
	"obsolete-version.tar": func(t testing.TB) []byte {
		bn := faketenancy.SampleApp("env-dev-01", 7)
		bn.Files["compose.yaml"] = "version: \"3.8\"\n" + bn.Files["compose.yaml"]
		return testbox.Tarball(t, bn, false)
	},
	// not-a-bundle: text, not a tar.
	"not-a-bundle.txt": func(testing.TB) []byte { return []byte("this is not a bundle\n") },
}

func fixture(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join("testdata", "bundles", name)
	if golden.Update() {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, fixtures[name](t), 0o644))
	}
	abs, err := filepath.Abs(p) // the binary runs in the box's directory
	require.NoError(t, err)
	return abs
}

func TestVersion(t *testing.T) {
	r := runMainExit(t, 0, nil, "version")
	assert.Equal(t, "monky-deployd "+deployd.Version+" (commit unknown)\n", r.Stdout)
	assert.Empty(t, r.Stderr)

	// The shipped build links the commit.
	b := newBox(t, boxOpts{})
	res := b.run([]string{"version"})
	require.Equal(t, 0, res.Code)
	assert.Equal(t, "monky-deployd "+deployd.Version+" (commit "+testCommit+")\n", res.Stdout)
	res = b.runExit(0, []string{"--version"})
	assert.Contains(t, res.Stdout, testCommit)
}

// TestUsageErrorsExit2: every usage error of every command exits 2 with the error on
// stderr, nothing on stdout, and no private key anywhere; help is not an error.
func TestUsageErrorsExit2(t *testing.T) {
	bundlePath := fixture(t, "good.tar.gz")
	privFile, pub := testSigningKey(t, 1)
	holdCfg := newBox(t, boxOpts{}).CfgPath
	hold := func(args ...string) []string { return append([]string{"hold", "--config", holdCfg}, args...) }
	tests := []struct {
		name string
		args []string
		want string // on stderr
	}{
		{"no command", nil, "usage:"},
		{"unknown command", []string{"deploy"}, `unknown command "deploy"`},
		{"unknown flag of run", []string{"run", "--bogus"}, "flag provided but not defined: -bogus"},
		{"stray argument of run", []string{"run", "extra"}, `expected 0 argument(s), got 1: ["extra"]`},
		{"stray argument of status", []string{"status", "--json", "now"}, "expected 0 argument(s)"},
		{"stray argument of bootstrap", []string{"bootstrap", "x"}, "expected 0 argument(s)"},
		{"bad duration", []string{"run", "--interval", "soon"}, "invalid value"},
		{"verify without --env", []string{"verify", bundlePath}, "--env is required"},
		{"verify without a bundle", []string{"verify", "--env", "env-dev-01"}, "expected 1 argument(s), got 0"},
		{"verify of two bundles", []string{"verify", "--env", "env-dev-01", bundlePath, bundlePath}, "expected 1 argument(s), got 2"},
		{"verify of a missing file", []string{"verify", "--env", "env-dev-01", "testdata/bundles/missing.tar"}, "no such file"},
		{"pack without --out", []string{"pack", t.TempDir()}, "--out is required"},
		{"pack of a file", []string{"pack", "--out", filepath.Join(t.TempDir(), "b.tar"), bundlePath}, "is not a directory"},
		{"pack of two directories", []string{"pack", "--out", "b.tar", t.TempDir(), t.TempDir()}, "expected 1 argument(s), got 2"},
		{"sign without --key", []string{"sign", bundlePath}, "--key is required"},
		{"sign without a bundle", []string{"sign", "--key", privFile}, "expected 1 argument(s), got 0"},
		{"sign with a bad expiry", []string{"sign", "--key", privFile, "--expires", "tomorrow", bundlePath}, "--expires: give a duration"},
		{"sign with a negative expiry", []string{"sign", "--key", privFile, "--expires", "-1h", bundlePath}, "a duration must be positive"},
		{"sign of a missing bundle", []string{"sign", "--key", privFile, "nope.tar"}, "no such file"},
		{"keygen without --out", []string{"keygen"}, "--out is required"},
		{"keygen with an argument", []string{"keygen", "--out", "k", "extra"}, "expected 0 argument(s)"},
		{"verify with a bad key", []string{"verify", "--env", "env-dev-01", "--key", "ed25519:AAAA", bundlePath}, "--key: key 1: bundle: invalid key"},
		{"verify with a private key as --key", []string{"verify", "--env", "env-dev-01", "--key", privFile, bundlePath}, "this is a private key"},
		{"verify with a missing key file", []string{"verify", "--env", "env-dev-01", "--key", "nope.pub", bundlePath}, "no such file"},
		{"verify with --sig but no --key", []string{"verify", "--env", "env-dev-01", "--sig", "x.sig", bundlePath}, "--sig needs --key"},
		{"verify with a missing --sig", []string{"verify", "--env", "env-dev-01", "--key", pub.String(), "--sig", "nope.sig", bundlePath}, "no such file"},
		{"hold without a reason", hold("--for", "1h"), "--for needs --reason"},
		{"hold with a reason alone", hold("--reason", "x"), "--reason needs --for"},
		{"hold for a negative time", hold("--for", "-1h", "--reason", "x"), "--for must be positive"},
		{"hold clearing and setting", hold("--clear", "--for", "1h", "--reason", "x"), "--clear takes neither"},
		{"hold with a long reason", hold("--for", "1h", "--reason", strings.Repeat("x", 201)), "longer than 200 bytes"},
		{"hold with an argument", hold("now"), "expected 0 argument(s)"},
		// An unknown flag prints the command's usage, also next to --help; so does help
		// of a command that does not exist.
		{"unknown flag of verify", []string{"verify", "--bogus"}, "flag provided but not defined: -bogus\nusage:\n  monky-deployd verify --env ENV"},
		{"unknown flag of verify, its flags", []string{"verify", "--bogus"}, "\n  --allow-privileged string\n"},
		{"unknown flag before --help", []string{"keygen", "--bogus", "--help"}, "flag provided but not defined: -bogus\nusage:\n  monky-deployd keygen"},
		{"a bad value before --help", []string{"run", "--interval", "soon", "--help"}, `invalid value "soon" for flag -interval`},
		{"help of an unknown command", []string{"help", "deploy"}, `unknown command "deploy"`},
		{"help of two commands", []string{"help", "run", "plan"}, "expected at most 1 argument, got 2"},
		{"version with an argument", []string{"version", "now"}, `expected 0 argument(s), got 1: ["now"]`},
	}
	secrets := secretsOf(t, privFile)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runMain(t, nil, tc.args...)
			assert.Equal(t, exitUsage, r.Code, r.Stderr)
			assert.Contains(t, r.Stderr, tc.want)
			assert.Empty(t, r.Stdout)
			assertNoSecret(t, r, secrets)
		})
	}
	t.Run("help is not an error", func(t *testing.T) {
		r := runMain(t, nil, "help")
		assert.Equal(t, 0, r.Code)
		assert.Equal(t, usage, r.Stdout)
	})
}

func TestVerify(t *testing.T) {
	goodSHA := fixtureSHA(t, "good.tar.gz")
	tests := []struct {
		name     string
		args     []string
		bundle   string
		code     int
		golden   string   // for --json runs
		lines    []string // for human runs: stdout, line by line
		refusals []string // codes, in order
		logs     bool     // compose-go may log its own warning on stderr (once per process)
	}{
		{name: "good, json", bundle: "good.tar.gz", args: []string{"--env", "env-dev-01", "--json"}, code: 0, golden: "verify-good.json"},
		{name: "good, human", bundle: "good.tar.gz", args: []string{"--env", "env-dev-01"}, code: 0,
			lines: []string{"accepted " + goodSHA}},
		{name: "good with its sha", bundle: "good.tar.gz", args: []string{"--env", "env-dev-01", "--sha", goodSHA, "--json"}, code: 0, golden: "verify-good.json"},
		{name: "sha mismatch", bundle: "good.tar.gz", args: []string{"--env", "env-dev-01", "--sha", strings.Repeat("0", 64), "--json"}, code: 1,
			golden: "verify-sha-mismatch.json", refusals: []string{"SHA_MISMATCH"}},
		{name: "sha mismatch, human", bundle: "good.tar.gz", args: []string{"--env", "env-dev-01", "--sha", strings.Repeat("0", 64)}, code: 1,
			golden: "verify-sha-mismatch.txt"},
		{name: "other env", bundle: "good.tar.gz", args: []string{"--env", "env-dev-02", "--json"}, code: 1,
			golden: "verify-env-mismatch.json", refusals: []string{"ENV_MISMATCH"}},
		{name: "rollback", bundle: "good.tar.gz", args: []string{"--env", "env-dev-01", "--live-serial", "9", "--json"}, code: 1,
			refusals: []string{"ROLLBACK"}},
		{name: "explicit rollback", bundle: "good.tar.gz", args: []string{"--env", "env-dev-01", "--live-serial", "9", "--rollback", "--json"}, code: 0,
			golden: "verify-good.json"},
		{name: "refused, json", bundle: "refused.tar", args: []string{"--env", "env-dev-01", "--json"}, code: 1,
			golden: "verify-refused.json", refusals: []string{"PRIVILEGED", "PRIVILEGED", "UNRESOLVED_VARS"}},
		{name: "refused, human", bundle: "refused.tar", args: []string{"--env", "env-dev-01"}, code: 1, golden: "verify-refused.txt"},
		{name: "privileged allowed", bundle: "refused.tar", args: []string{"--env", "env-dev-01", "--allow-privileged", "web", "--json"}, code: 1,
			refusals: []string{"UNRESOLVED_VARS"}},
		{name: "privileged allowed, spaced list", bundle: "refused.tar", args: []string{"--env", "env-dev-01", "--allow-privileged", " worker , web ,", "--json"}, code: 1,
			refusals: []string{"UNRESOLVED_VARS"}},
		{name: "privileged allowed for another service", bundle: "refused.tar", args: []string{"--env", "env-dev-01", "--allow-privileged", "worker", "--json"}, code: 1,
			refusals: []string{"PRIVILEGED", "PRIVILEGED", "UNRESOLVED_VARS"}},
		// compose's own warnings name the bundle's file, in "warnings" and after the verdict.
		{name: "warnings, json", bundle: "obsolete-version.tar", args: []string{"--env", "env-dev-01", "--json"}, code: 0,
			golden: "verify-warnings.json", logs: true},
		{name: "warnings, human", bundle: "obsolete-version.tar", args: []string{"--env", "env-dev-01"}, code: 0,
			golden: "verify-warnings.txt", logs: true},
		{name: "not a bundle, json", bundle: "not-a-bundle.txt", args: []string{"--env", "env-dev-01", "--json"}, code: 1,
			golden: "verify-not-a-bundle.json", refusals: []string{"BUNDLE_MALFORMED"}},
		{name: "not a bundle, human", bundle: "not-a-bundle.txt", args: []string{"--env", "env-dev-01"}, code: 1, golden: "verify-not-a-bundle.txt"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runMain(t, nil, append(append([]string{"verify"}, tc.args...), fixture(t, tc.bundle))...)
			assert.Equal(t, tc.code, r.Code, "stderr: %s", r.Stderr)
			if tc.logs && r.Stderr != "" {
				assert.Regexp(t, "^[^\n]*level=WARN msg=\"compose.yaml: the attribute `version` is obsolete[^\n]*\n$", r.Stderr)
			} else {
				assert.Empty(t, r.Stderr)
			}
			if tc.golden != "" {
				golden.Assert(t, "golden/"+tc.golden, []byte(r.Stdout))
			}
			if tc.lines != nil {
				assert.Equal(t, strings.Join(tc.lines, "\n")+"\n", r.Stdout)
			}
			if slices.Contains(tc.args, "--json") {
				// Exactly {"sha":"…","refusals":[{"code":"…","detail":"…"}],"warnings":["…"]}:
				// no other key, refusals and warnings lists (empty when none), never null.
				dec := json.NewDecoder(strings.NewReader(r.Stdout))
				dec.DisallowUnknownFields()
				var v struct {
					SHA      *string `json:"sha"`
					Refusals *[]struct {
						Code   *string `json:"code"`
						Detail *string `json:"detail"`
					} `json:"refusals"`
					Warnings *[]string `json:"warnings"`
				}
				require.NoError(t, dec.Decode(&v), "verify --json must print exactly sha, refusals and warnings: %s", r.Stdout)
				require.NotNil(t, v.SHA)
				require.NotNil(t, v.Refusals, "refusals must be a list, not null or absent")
				require.NotNil(t, v.Warnings, "warnings must be a list, not null or absent")
				for _, w := range *v.Warnings {
					assert.NotContains(t, w, "/monky/release", "a warning names the bundle's file, not the load path")
				}
				var codes []string
				for _, rf := range *v.Refusals {
					require.NotNil(t, rf.Code)
					require.NotNil(t, rf.Detail)
					assert.NotEmpty(t, *rf.Detail)
					codes = append(codes, *rf.Code)
				}
				assert.Equal(t, tc.refusals, codes)
				assert.Equal(t, strings.Count(r.Stdout, "\n"), 1, "one line of JSON")
				if tc.bundle != "not-a-bundle.txt" {
					assert.Equal(t, fixtureSHA(t, tc.bundle), *v.SHA)
				}
			}
		})
	}
}

// fixtureSHA is fixtureSHAOf the fixture name.
func fixtureSHA(t *testing.T, name string) string {
	t.Helper()
	return fixtureSHAOf(t, fixture(t, name))
}

// TestStatus: status reads the state and the token file, never the network. (A config
// it cannot read: TestRunBadConfig.)
func TestStatus(t *testing.T) {
	t.Run("missing state", func(t *testing.T) {
		b := newBox(t, boxOpts{})
		// A box not bootstrapped yet is critical: exit 2 (deployd's TestStatusView has
		// the text and JSON of this view: the goldens status/missing.*).
		r := runMainExit(t, 2, b.procEnv(), "status", "--config", b.CfgPath)
		assert.Regexp(t, `(?m)^token:\s+missing$`, r.Stdout)
		assert.Equal(t, deployd.TokenMissing, statusJSONOf(t, b, 2).Token.State)
		assert.Empty(t, b.Stack.Tenancy.Requests())
		assert.Empty(t, b.Stack.Bao.Requests())
	})

	t.Run("after a run", func(t *testing.T) {
		b := newBox(t, boxOpts{})
		sha := b.Publish(faketenancy.SampleApp(b.Env, 4))
		res := runMain(t, b.procEnv(), "run", "--config", b.CfgPath)
		require.Equal(t, deployd.ExitOK, res.Code, res.Stderr)
		assert.Equal(t, `""`, tickCode(t, res.Stderr), "a tick that did its job has no code")
		tenancyBefore, baoBefore := len(b.Stack.Tenancy.Requests()), len(b.Stack.Bao.Requests())
		// No network: the fakes are gone.
		b.Stack.Tenancy.Close()
		b.Stack.Bao.Close()
		r := runMainExit(t, 0, b.procEnv(), "status", "--config", b.CfgPath)
		// The text of each field is deployd's TestStatusView (status/healthy.txt).
		assert.Regexp(t, `(?m)^live:\s+`+sha+` \(serial 4, healthy confirmed: true\)$`, r.Stdout)

		v := statusJSONOf(t, b, 0)
		require.NotNil(t, v.Live)
		assert.Equal(t, sha, v.Live.SHA)
		assert.Equal(t, int64(4), v.Live.Serial)
		assert.True(t, v.Live.Confirmed)
		require.NotNil(t, v.LastReport)
		assert.Equal(t, "applied", v.LastReport.Result)
		assert.Equal(t, "present", v.Token.State)
		assert.NotNil(t, v.Token.Expires)
		assert.Nil(t, v.Latch)
		assert.True(t, v.Healthy)
		assert.Len(t, b.Stack.Tenancy.Requests(), tenancyBefore)
		assert.Len(t, b.Stack.Bao.Requests(), baoBefore)
		assert.NotContains(t, r.Stdout, strings.TrimSpace(string(readFile(t, b.Cfg.TokenPath()))))
	})

	t.Run("latched", func(t *testing.T) {
		b := newBox(t, boxOpts{noGrant: true})
		b.placeForeignToken()
		for range 2 { // the tick that latches, and one that only reads the latch
			r := runMainExit(t, deployd.ExitEnvMismatch, b.procEnv(), "run", "--config", b.CfgPath)
			assert.Equal(t, "AGENT_ENV_MISMATCH", tickCode(t, r.Stderr))
		}
		r := runMain(t, b.procEnv(), "status", "--config", b.CfgPath)
		require.Equal(t, 2, r.Code, "a latched box is critical")
		assert.Regexp(t, `(?m)^latch:\s+AGENT_ENV_MISMATCH since 20\d\d-.*: runs exit 78 until env_id changes or you bootstrap$`, r.Stdout)
		assert.Regexp(t, `(?m)^live:\s+none$`, r.Stdout)
		v := statusJSONOf(t, b, 2)
		require.NotNil(t, v.Latch)
		assert.Equal(t, "env-dev-01", v.Latch.EnvID)
		assert.True(t, v.Latch.Active)
		assert.Nil(t, v.LastReport, "no report was sent: the latch is not a report's code")
		require.NotNil(t, v.Condition)
		assert.Equal(t, codes.AgentEnvMismatch, v.Condition.Code)
		require.NotNil(t, v.LastRun)
		assert.Equal(t, codes.AgentEnvMismatch, v.LastRun.Code)
	})

	t.Run("corrupt state", func(t *testing.T) {
		b := newBox(t, boxOpts{})
		require.NoError(t, os.MkdirAll(b.Cfg.StateDir, 0o700))
		require.NoError(t, os.WriteFile(b.Cfg.StatePath(), []byte("{not json"), 0o600))
		r := runMain(t, b.procEnv(), "status", "--config", b.CfgPath)
		assert.Equal(t, 3, r.Code, "status cannot tell: unknown")
		assert.Regexp(t, `^status:\s+UNKNOWN: .*state.json is corrupt`, r.Stdout)
		assert.Contains(t, r.Stdout, "the next run moves it aside")
	})
}

// TestRunBadConfig: a config error exits 1 (status 3) with a message that names the
// key and its line and carries CONFIG_INVALID, before any network. (Which configs are
// refused, and each error's text, is deployd's TestParseConfigBad; the path in the
// text, TestLoadConfigErrors.)
func TestRunBadConfig(t *testing.T) {
	b := newBox(t, boxOpts{})
	good := readFile(t, b.CfgPath)
	p := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(p, append(good, "not_a_key: 1\n"...), 0o600))
	want := fmt.Sprintf(`%s:%d: unknown key "not_a_key"`, p, bytes.Count(good, []byte("\n"))+1)
	for _, cmd := range []string{"run", "bootstrap", "status"} {
		r := runMain(t, b.procEnv(), cmd, "--config", p)
		assert.Regexp(t, `msg="the config is invalid; fix it and run again" .*code=CONFIG_INVALID`, r.Stderr, cmd)
		// slog's text handler escapes the quotes of the error text.
		assert.Contains(t, strings.ReplaceAll(r.Stderr, `\"`, `"`), want, cmd)
		if cmd == "status" {
			// status cannot tell: unknown (3), and it says why on stdout.
			assert.Equal(t, 3, r.Code, cmd)
			assert.Regexp(t, `^status:\s+UNKNOWN: `, r.Stdout)
			continue
		}
		assert.Equal(t, deployd.ExitFailed, r.Code, cmd)
		assert.Empty(t, r.Stdout)
	}
	assert.Empty(t, b.Stack.Tenancy.Requests(), "a bad config touches no network")
	assert.Empty(t, b.Stack.Bao.Requests())
	t.Run("missing file", func(t *testing.T) {
		const p = "/nonexistent/monky/config.yaml"
		r := runMain(t, nil, "run", "--config", p)
		assert.Equal(t, 1, r.Code)
		assert.Contains(t, r.Stderr, p)
		r = runMain(t, nil, "status", "--config", p)
		assert.Equal(t, 3, r.Code)
		assert.Contains(t, r.Stderr, p)
		assert.Regexp(t, `^status:\s+UNKNOWN: .*`+p, r.Stdout)
	})
}

var (
	journalLineRE = regexp.MustCompile(`^<[0-7]>level=(DEBUG|INFO|WARN|ERROR) msg=`)
	textLineRE    = regexp.MustCompile(`^time=20\d\d-\d\d-\d\dT[0-9:.]+(Z|[+-]\d\d:\d\d) level=(DEBUG|INFO|WARN|ERROR) msg=`)
)

// TestJournalStream: under systemd every stderr line starts with its priority and has
// no timestamp; elsewhere the lines are normal slog text lines.
func TestJournalStream(t *testing.T) {
	for _, journal := range []bool{true, false} {
		t.Run(map[bool]string{true: "journal", false: "terminal"}[journal], func(t *testing.T) {
			b := newBox(t, boxOpts{})
			var extra []string
			if journal {
				extra = append(extra, "JOURNAL_STREAM=8:123456")
			}
			b.Publish(faketenancy.SampleApp(b.Env, 1))
			check := func(stderr string) {
				t.Helper()
				lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
				require.GreaterOrEqual(t, len(lines), 3, "a tick logs several lines:\n%s", stderr)
				for _, l := range lines {
					if journal {
						assert.Regexp(t, journalLineRE, l)
						assert.NotRegexp(t, `(^|\s)time=`, l)
					} else {
						assert.Regexp(t, textLineRE, l)
					}
				}
			}
			// In-process, then through the real binary (which -short skips).
			r := runMainExit(t, 0, b.procEnv(extra...), "run", "--config", b.CfgPath, "--metrics-file", filepath.Join(b.Dir, "metrics.prom"))
			check(r.Stderr)
			assert.Contains(t, r.Stderr, "tick done")
			if journal {
				// A failure at <3>.
				r := runMain(t, extra, "run", "--config", filepath.Join(b.Dir, "missing.yaml"))
				assert.Regexp(t, `^<3>level=ERROR msg="the config is invalid; fix it and run again"`, r.Stderr)
			}
			b.SetDesired(faketenancy.Desired{Action: "down"})
			res := b.runExit(0, []string{"run", "--config", b.CfgPath}, extra...)
			check(res.Stderr)
			if journal {
				assert.Regexp(t, `(?m)^<6>level=INFO msg="tick done"`, res.Stderr)
				// The debug lines too, at <7>.
				b.SetDesired(faketenancy.Desired{Action: "none"})
				res = b.run([]string{"run", "--config", b.CfgPath}, append(extra, "MONKY_DEPLOYD_DEBUG=1")...)
				require.Equal(t, 0, res.Code)
				assert.Regexp(t, `(?m)^<7>level=DEBUG `, res.Stderr)
				check(res.Stderr)
			}
		})
	}
}

// TestLogrusGoesThroughSlog: compose-go warns through the process-global logrus
// logger; its lines come out as slog lines (and so through the redactor), never in
// logrus's own format.
func TestLogrusGoesThroughSlog(t *testing.T) {
	bundlePath := fixture(t, "obsolete-version.tar")
	check := func(stderr string, journal bool) {
		t.Helper()
		// compose-go warns once per file name and process (and names the bundle's
		// file); an earlier in-process test may have had it already.
		if stderr == "" {
			return
		}
		require.Contains(t, stderr, "compose.yaml: the attribute `version` is obsolete", "compose-go must have warned")
		assert.NotContains(t, stderr, "/monky/release", "the bundle's file, not the load path")
		for _, l := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
			if journal {
				assert.Regexp(t, `^<4>level=WARN msg=`, l)
			} else {
				assert.Regexp(t, textLineRE, l)
				assert.Contains(t, l, "level=WARN")
			}
			assert.NotContains(t, l, "level=warning", "logrus's own text format")
		}
	}
	// In-process (compose-go may have warned already for compose.yaml in this process) …
	r := runMainExit(t, 0, nil, "verify", "--env", "env-dev-01", bundlePath)
	check(r.Stderr, false)

	// Whatever a library logs passes the redactor: a token status has read is masked.
	b2 := newBox(t, boxOpts{})
	require.NoError(t, os.MkdirAll(b2.Cfg.StateDir, 0o700))
	require.NoError(t, os.WriteFile(b2.Cfg.TokenPath(), []byte("hvs.canary-token-for-logrus\n"), 0o600))
	var stdout, stderr bytes.Buffer
	code := Main(t.Context(), []string{"status", "--config", b2.CfgPath}, nil, &stdout, &stderr)
	require.Equal(t, 0, code)
	logrus.WithField("auth", "Bearer hvs.canary-token-for-logrus").Warn("a library echoed hvs.canary-token-for-logrus")
	assert.Contains(t, stderr.String(), "level=WARN")
	assert.NotContains(t, stderr.String(), "canary-token-for-logrus")
	assert.NotContains(t, stdout.String(), "canary-token-for-logrus")
	logrus.StandardLogger().ReplaceHooks(logrus.LevelHooks{}) // leave no hook on a dead buffer

	// And through the real binary (which -short skips), on a terminal and under systemd.
	b := newBox(t, boxOpts{})
	res := b.run([]string{"verify", "--env", "env-dev-01", bundlePath})
	require.Equal(t, 0, res.Code)
	require.NotEmpty(t, res.Stderr, "a fresh process logs compose-go's warning")
	check(res.Stderr, false)
	res = b.run([]string{"verify", "--env", "env-dev-01", bundlePath}, "JOURNAL_STREAM=8:1")
	require.Equal(t, 0, res.Code)
	check(res.Stderr, true)
}

// brokenPipe fails every write, as stdout does when the reader of a pipe is gone.
type brokenPipe struct{}

func (brokenPipe) Write([]byte) (int, error) { return 0, syscall.EPIPE }

// TestOutputFailureIsExit1: a result that cannot be written is not a silent success.
func TestOutputFailureIsExit1(t *testing.T) {
	b := newBox(t, boxOpts{})
	for _, args := range [][]string{
		{"version"},
		{"help"},
		{"status", "--config", b.CfgPath},
		{"status", "--config", b.CfgPath, "--json"},
		{"verify", "--env", "env-dev-01", fixture(t, "good.tar.gz")},
		{"verify", "--env", "env-dev-01", "--json", fixture(t, "good.tar.gz")},
	} {
		t.Run(strings.Join(args[:1], " "), func(t *testing.T) {
			var stderr bytes.Buffer
			code := Main(t.Context(), args, b.procEnv(), brokenPipe{}, &stderr)
			assert.Equal(t, deployd.ExitFailed, code, "%v", args)
			assert.Contains(t, stderr.String(), "could not write the output")
			assert.Contains(t, stderr.String(), "broken pipe")
		})
	}
}

// TestTickLineCarriesTheCode: every tick line names its code, also when the tick
// stopped before it had an outcome: a held lock, an unusable state dir. (The latch's
// and a tick that applied are TestStatus's; the config's error line, which carries
// CONFIG_INVALID, TestRunBadConfig's.)
func TestTickLineCarriesTheCode(t *testing.T) {
	t.Run("lock held", func(t *testing.T) {
		b := newBox(t, boxOpts{})
		b.HoldLock()
		r := runMainExit(t, deployd.ExitTemporary, b.procEnv(), "run", "--config", b.CfgPath)
		assert.Equal(t, "LOCKED", tickCode(t, r.Stderr))
	})
	t.Run("state dir unusable", func(t *testing.T) {
		b := newBox(t, boxOpts{})
		require.NoError(t, os.WriteFile(b.Cfg.StateDir, nil, 0o600)) // a file where the dir goes
		r := runMainExit(t, deployd.ExitFailed, b.procEnv(), "run", "--config", b.CfgPath)
		assert.Equal(t, "STATE_UNAVAILABLE", tickCode(t, r.Stderr))
	})
}
