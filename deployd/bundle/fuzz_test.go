package bundle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/ids"
)

// envIDRE checks accepted env_ids with the documented pattern, not with the validator
// the code under test uses.
var envIDRE = regexp.MustCompile(ids.EnvIDPattern)

// fuzzLimits keep each fuzz input cheap and let the fuzzer reach every limit.
var fuzzLimits = Limits{MaxEntries: 64, MaxFileSize: 1 << 20, MaxTotalSize: 2 << 20,
	MaxManifestSize: 16 << 10, MaxComposeFileSize: 64 << 10, MaxBufferSize: 256 << 10, MaxHeaderSize: 8 << 10}

// addFixtureSeeds seeds f with every fixture of testdata but the bombs.
func addFixtureSeeds(f *testing.F) {
	for _, name := range fixtureNames(f) {
		if len(name) > 4 && name[:4] == "bomb" {
			continue
		}
		data, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(f, err)
		f.Add(data)
	}
}

func FuzzVerify(f *testing.F) {
	addFixtureSeeds(f)
	for _, tt := range refusalCases() {
		if data := tt.data(f); len(data) <= 64<<10 { // big seeds stall the mutator
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := Verify(context.Background(), bytes.NewReader(data), Expect{EnvID: testEnv, Limits: fuzzLimits})
		var re *RefusedError
		switch {
		case err == nil:
			if res == nil || len(res.Refusals) != 0 || len(res.SHA) != 64 {
				t.Fatalf("accepted without a clean result: %+v", res)
			}
			if res.Size > fuzzLimits.MaxTotalSize || res.Files > fuzzLimits.MaxEntries {
				t.Fatalf("accepted past the limits: %+v", res)
			}
			sha, err := SHA(context.Background(), bytes.NewReader(data), fuzzLimits)
			if err != nil || sha != res.SHA {
				t.Fatalf("SHA disagrees with Verify: %q %v", sha, err)
			}
		case errors.As(err, &re):
			if res == nil || len(re.Refusals) == 0 || !slices.Equal(re.Refusals, res.Refusals) {
				t.Fatalf("refusal without details: %v %+v", err, res)
			}
			for _, r := range re.Refusals {
				if r.Code == "" || r.Detail == "" {
					t.Fatalf("empty refusal: %+v", r)
				}
			}
		default:
			t.Fatalf("a plain error for bytes from a reader that cannot fail: %v", err)
		}
	})
}

func FuzzManifest(f *testing.F) {
	good, err := json.Marshal(goodManifest())
	require.NoError(f, err)
	f.Add(good)
	for _, s := range []string{
		`{}`, `[]`, `null`, `{"schema":1}`, `{"schema":1,"schema":1}`,
		`{"schema":1,"env_id":"env-dev-01","serial":1,"compose_files":["c.yaml"],"files":["c.yaml"],"secrets":{"A":{"path":"../x","key":"k"}}}`,
		`{"schema":1,"env_id":"env-dev-01","serial":1,"compose_files":["c.yaml"],"files":["c.yaml"],"vars":{"A":"1","A":"2"}}`,
		`{"schema":1.5}`, `{"Schema":1}`, "{\"schema\":1}\x00",
		`{"schema":2,"env_id":"env-dev-01","serial":1,"compose_files":["c.yaml"],"files":["c.yaml"],"restore":"unsafe","hooks":{"before_switch":[{"service":"b","timeout_s":5,"repeatable":true}]}}`,
		`{"schema":1,"env_id":"env-dev-01","serial":1,"compose_files":["c.yaml"],"files":["c.yaml"],"hooks":{"after_switch":[{"service":"s"}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, rs := decodeManifest(data)
		for _, r := range rs {
			if r.Code == "" || r.Detail == "" {
				t.Fatalf("empty refusal: %+v", r)
			}
		}
		if len(rs) > 0 {
			return
		}
		// An accepted manifest survives a round trip and passes the documented rules.
		if m.Schema < 1 || m.Schema > SchemaVersion || m.Schema < SchemaHooks && (m.Hooks != nil || m.Restore != "") || m.Serial < 1 || !envIDRE.MatchString(m.EnvID) || len(m.ComposeFiles) == 0 {
			t.Fatalf("accepted an invalid manifest: %+v", m)
		}
		for name, ref := range m.Secrets {
			if checkSecretPath(ref.Path) != "" || checkEnvName(name) != "" {
				t.Fatalf("accepted secret %q", name)
			}
			if _, dup := m.Vars[name]; dup {
				t.Fatalf("accepted %q in vars and secrets", name)
			}
		}
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, rs2 := decodeManifest(again)
		if len(rs2) > 0 {
			t.Fatalf("re-encoded manifest refused: %v", rs2)
		}
		b1, _ := json.Marshal(m2)
		if !bytes.Equal(again, b1) {
			t.Fatalf("round trip changed the manifest:\n%s\n%s", again, b1)
		}
	})
}

// FuzzSHA fuzzes the stream reader alone (no compose checks), which runs far more
// inputs per second than FuzzVerify.
func FuzzSHA(f *testing.F) {
	addFixtureSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		sha, err := SHA(context.Background(), bytes.NewReader(data), fuzzLimits)
		var re *RefusedError
		switch {
		case err == nil:
			if len(sha) != 64 {
				t.Fatalf("sha %q", sha)
			}
		case errors.As(err, &re):
			if sha != "" || len(re.Refusals) == 0 {
				t.Fatalf("refused with sha %q and %v", sha, re.Refusals)
			}
			for _, r := range re.Refusals {
				if r.Code != codes.BundleMalformed || r.Detail == "" {
					t.Fatalf("SHA refuses only with BUNDLE_MALFORMED: %+v", r)
				}
			}
		default:
			t.Fatalf("plain error from a reader that cannot fail: %v", err)
		}
	})
}
