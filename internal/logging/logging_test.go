package logging_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/internal/logging"
)

func TestPriority(t *testing.T) {
	tests := []struct {
		level slog.Level
		want  int
	}{
		{slog.LevelDebug - 4, 7},
		{slog.LevelDebug, 7},
		{slog.LevelInfo - 1, 7},
		{slog.LevelInfo, 6},
		{slog.LevelInfo + 2, 6},
		{slog.LevelWarn, 4},
		{slog.LevelError - 1, 4},
		{slog.LevelError, 3},
		{slog.LevelError + 8, 3},
	}
	for _, tt := range tests {
		t.Run(tt.level.String(), func(t *testing.T) {
			assert.Equal(t, tt.want, logging.Priority(tt.level))
		})
	}
}

var timeRE = regexp.MustCompile(`\b20\d\d-\d\d-\d\dT\d\d:\d\d`)

func TestJournalText(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(logging.NewHandler(&buf, logging.Options{Level: slog.LevelDebug, Journal: true}))
	log.Debug("d", "k", 1)
	log.Info("check-in", "env_id", "env-dev-01")
	log.Warn("w", "path", "/srv/monky")
	log.Error("e", "err", errors.New("boom"))
	log.With("env_id", "env-dev-01").WithGroup("tick").Info("grouped", "sha", "abc")
	log.Info("multi\nline message")
	// Only the record's own timestamp is dropped, not an attribute called "time" in a group.
	log.Info("m", slog.Group("lease", slog.String("time", "t1")))
	want := strings.Join([]string{
		"<7>level=DEBUG msg=d k=1",
		"<6>level=INFO msg=check-in env_id=env-dev-01",
		"<4>level=WARN msg=w path=/srv/monky",
		"<3>level=ERROR msg=e err=boom",
		"<6>level=INFO msg=grouped env_id=env-dev-01 tick.sha=abc",
		`<6>level=INFO msg="multi\nline message"`,
		"<6>level=INFO msg=m lease.time=t1",
	}, "\n") + "\n"
	assert.Equal(t, want, buf.String())
	assert.False(t, timeRE.MatchString(buf.String()))
}

func TestJournalJSON(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(logging.NewHandler(&buf, logging.Options{Journal: true, JSON: true}))
	log.Debug("dropped at the default level")
	log.Warn("low disk", "free_mb", 100)
	log.WithGroup("g").Error("e", "a", "b")
	assert.Equal(t,
		`<4>{"level":"WARN","msg":"low disk","free_mb":100}`+"\n"+
			`<3>{"level":"ERROR","msg":"e","g":{"a":"b"}}`+"\n",
		buf.String())
}

func TestPlainHasTimestamps(t *testing.T) {
	for _, jsonOut := range []bool{false, true} {
		var buf bytes.Buffer
		log := slog.New(logging.NewHandler(&buf, logging.Options{JSON: jsonOut}))
		log.Info("hello", "k", "v")
		log.Debug("dropped")
		out := buf.String()
		assert.Equal(t, 1, strings.Count(out, "\n"))
		assert.True(t, timeRE.MatchString(out), out)
		assert.False(t, strings.HasPrefix(out, "<"), out)
		if jsonOut {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(out), &m))
			assert.Equal(t, "hello", m["msg"])
		} else {
			assert.Contains(t, out, " level=INFO msg=hello k=v\n")
		}
	}
}

func TestJournalConcurrentLinesStayWhole(t *testing.T) {
	var buf bytes.Buffer
	h := logging.NewHandler(&buf, logging.Options{Journal: true})
	var wg sync.WaitGroup
	for i := range 4 {
		log := slog.New(h).With("g", i)
		wg.Go(func() {
			for range 200 {
				log.Warn("line", "x", strings.Repeat("y", 50))
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	require.Len(t, lines, 800)
	for _, l := range lines {
		require.Regexp(t, `^<4>level=WARN msg=line g=\d x=y{50}$`, l)
	}
}

// logrusFixture routes a fresh logrus logger into a JSON slog handler wrapped by a
// Redactor that knows planted.
func logrusFixture(t *testing.T, level slog.Level, planted ...string) (*logrus.Logger, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	red := secret.NewRedactor()
	for _, p := range planted {
		red.Add(p)
	}
	var out bytes.Buffer
	h := logging.NewHandler(&out, logging.Options{Level: level, JSON: true, Journal: true})
	l := logrus.New()
	var raw bytes.Buffer
	l.SetOutput(&raw) // must stay empty after routing
	l.SetLevel(logrus.PanicLevel)
	logging.RouteLogrus(l, slog.New(red.Handler(h)))
	return l, &out, &raw
}

func TestRouteLogrus(t *testing.T) {
	const planted = "s.planted-token-1234"
	l, out, raw := logrusFixture(t, slog.LevelDebug, planted)
	assert.Equal(t, logrus.DebugLevel, l.GetLevel())

	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	l.Trace("trace is below debug")
	l.WithTime(at).Debug("debug entry\n")
	l.WithFields(logrus.Fields{"service": "monky-tenancy", "attempt": 2}).Info("dialing")
	l.WithField("token", planted).Warn("got token " + planted)
	l.WithError(errors.New("login failed: " + planted)).Error("bao")

	assert.Empty(t, raw.String(), "nothing written to the logrus output")
	assert.NotContains(t, out.String(), planted)
	want := strings.Join([]string{
		`<7>{"level":"DEBUG","msg":"debug entry"}`,
		`<6>{"level":"INFO","msg":"dialing","attempt":2,"service":"monky-tenancy"}`,
		`<4>{"level":"WARN","msg":"got token [REDACTED]","token":"[REDACTED]"}`,
		`<3>{"level":"ERROR","msg":"bao","error":"login failed: [REDACTED]"}`,
	}, "\n") + "\n"
	assert.Equal(t, want, out.String())
}

func TestRouteLogrusLevels(t *testing.T) {
	tests := []struct {
		slog  slog.Level
		want  logrus.Level
		lines int // of trace, debug, info, warn, error
	}{
		{slog.LevelDebug - 4, logrus.TraceLevel, 5},
		{slog.LevelDebug, logrus.DebugLevel, 4},
		{slog.LevelInfo, logrus.InfoLevel, 3},
		{slog.LevelWarn, logrus.WarnLevel, 2},
		{slog.LevelError, logrus.ErrorLevel, 1},
		{slog.LevelError + 4, logrus.ErrorLevel, 0},
	}
	for _, tt := range tests {
		t.Run(tt.slog.String(), func(t *testing.T) {
			l, out, raw := logrusFixture(t, tt.slog)
			assert.Equal(t, tt.want, l.GetLevel())
			l.Trace("t")
			l.Debug("d")
			l.Info("i")
			l.Warn("w")
			l.Error("e")
			assert.Equal(t, tt.lines, strings.Count(out.String(), "\n"), out.String())
			assert.Empty(t, raw.String())
		})
	}
}

func TestRouteLogrusPanicAndNil(t *testing.T) {
	l, out, raw := logrusFixture(t, slog.LevelInfo)
	assert.Panics(t, func() { l.Panic("library gave up") })
	assert.Equal(t, `<3>{"level":"ERROR+8","msg":"library gave up"}`+"\n", out.String())
	assert.Empty(t, raw.String())

	l2 := logrus.New()
	var raw2 bytes.Buffer
	l2.SetOutput(&raw2)
	logging.RouteLogrus(l2, nil)
	l2.Error("discarded")
	assert.Empty(t, raw2.String())
}

func ExampleNewHandler() {
	log := slog.New(logging.NewHandler(os.Stdout, logging.Options{Journal: true}))
	log.Info("check-in", "env_id", "env-dev-01", "action", "none")
	log.Error("apply failed", "code", "UNHEALTHY")
	// Output:
	// <6>level=INFO msg=check-in env_id=env-dev-01 action=none
	// <3>level=ERROR msg="apply failed" code=UNHEALTHY
}

func ExampleRouteLogrus() {
	red := secret.NewRedactor()
	red.Add("hvs.example-token")
	logger := slog.New(red.Handler(logging.NewHandler(os.Stdout, logging.Options{Journal: true})))

	lib := logrus.New() // cmd/ passes logrus.StandardLogger()
	logging.RouteLogrus(lib, logger)
	lib.WithField("service", "monky-tenancy").Warn("retrying with token hvs.example-token")
	// Output:
	// <4>level=WARN msg="retrying with token [REDACTED]" service=monky-tenancy
}
