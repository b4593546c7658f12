package metrics

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/ids"
	"github.com/monky/monky-deployd/internal/fsutil"
)

// Prefix starts every metric name.
const Prefix = "monky_deployd_"

// FileMode is the mode of the metrics file: node_exporter, running as its own user,
// reads it.
const FileMode fs.FileMode = 0o644

// ErrInvalid is wrapped by every error Format and Write return for a Snapshot field
// that is out of its allowed range or pattern.
var ErrInvalid = errors.New("metrics: invalid snapshot")

// FieldError names the Snapshot field that was refused and why. It never carries the
// field's value. It unwraps to ErrInvalid.
type FieldError struct {
	// Field is the Go name of the Snapshot field, e.g. "LastCode".
	Field string
	// Reason says what the value must look like.
	Reason string
}

// Error returns the field name and the reason, never the value.
func (e *FieldError) Error() string {
	return fmt.Sprintf("metrics: snapshot field %s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// Snapshot is the outcome of the latest tick, as the metrics file shows it.
// Its zero value is valid and describes a box that has never checked in.
type Snapshot struct {
	// EnvID is the box's env_id (env-<tier>-<nn>); empty when the config was not read.
	EnvID string
	// Version is the agent's version (deployd.Version).
	Version string
	// LastRun is when the tick that produced the snapshot ended.
	LastRun time.Time
	// LastCheckin is the time of the last successful check-in; zero if never.
	LastCheckin time.Time
	// LastResult is the last reported result: "applied", "failed", "down" or "" (none yet).
	LastResult string
	// LastCode is the stable code of the last result (e.g. codes.Unhealthy), "" for none.
	LastCode codes.Code
	// TickDuration is how long the tick took.
	TickDuration time.Duration
	// LiveSHA is the bundle sha of the live release (64 lowercase hex), "" for none.
	LiveSHA string
	// LiveSerial is the serial of the live release, 0 for none.
	LiveSerial int64
	// TokenTTL is the remaining TTL of the OpenBao token, 0 when the agent holds none.
	TokenTTL time.Duration
	// EnvMismatchLatched reports the AGENT_ENV_MISMATCH latch (exit 78 until cleared).
	EnvMismatchLatched bool
	// ExitCode is the exit code of the tick: 0, 75, 78 or 1 (any 0–255 is accepted).
	ExitCode int
	// LastRestore is what became of the box after the last apply that failed after
	// promote (deployd's restore results: lowercase letters and dashes), or "" when no
	// failure needed a restore since the last successful apply.
	LastRestore string
	// Degraded is true when that restore left the box degraded (deployd's
	// Restore.Degraded): the metric's value.
	Degraded bool
	// Live is the live release's health at the last check-in; nil when nothing is
	// live (then no live or service metric is written).
	Live *Live
	// ImagesRemoved and ImagesReclaimedBytes are what the image hygiene of the last
	// apply that removed images removed, and an upper bound of the space it freed.
	ImagesRemoved        int
	ImagesReclaimedBytes int64
	// Verdict is the status verdict after the tick (deployd.Status): "ok",
	// "warning", "critical" or "unknown"; its metric's value is status's exit code.
	Verdict string
	// VerdictExit is that exit code: 0, 1, 2 or 3.
	VerdictExit int
	// Condition is the streak of runs that did not end 0 (deployd.Condition); nil
	// when the last run ended 0.
	Condition *Condition
	// Deferred is the apply the box prepared and did not switch to; nil when nothing
	// waits.
	Deferred *Deferral
	// TenancyUnreached is when the first of the check-ins in a row that did not reach
	// tenancy failed; zero while check-ins are answered.
	TenancyUnreached time.Time
}

// Condition is the box's condition in a Snapshot.
type Condition struct {
	// Code is the code the latest run ended on.
	Code codes.Code
	// Exit is that run's exit code.
	Exit int
	// Since is when the first run of the streak ended.
	Since time.Time
	// Runs counts the runs of the streak.
	Runs int
	// NextAttempt is when the box tries again by itself; zero: at the next tick.
	NextAttempt time.Time
}

// Live is the live release's health in a Snapshot.
type Live struct {
	// Known is false when docker could not be asked; Healthy and Services are then
	// not shown.
	Known bool
	// Healthy is true when every service is ready.
	Healthy bool
	// ObservedAt is when docker was asked.
	ObservedAt time.Time
	// Services are the live release's services.
	Services []Service
}

// Service is one service of Live.
type Service struct {
	// Name is the compose service name ([a-zA-Z0-9._-]).
	Name string
	// Healthy is the agent's verdict on it.
	Healthy bool
	// Restarts is how often docker restarted its containers.
	Restarts int
}

// The shapes of the snapshot's words, checked by word: a first character of first,
// then up to max-1 of rest. (Regular expressions of the same shapes cost the timer's
// idle tick process 0.4 ms to compile at start.)
const (
	lower  = "abcdefghijklmnopqrstuvwxyz"
	upper  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	digits = "0123456789"
)

func isVersion(s string) bool { return word(s, 64, digits+upper+lower, digits+upper+lower+".+~-") }
func isCode(s string) bool    { return word(s, 64, upper, upper+digits+"_") }
func isRestore(s string) bool { return word(s, 32, lower, lower+"-") }

// word reports whether s is 1 to max bytes long, its first of first and the rest of
// rest.
func word(s string, max int, first, rest string) bool {
	if len(s) == 0 || len(s) > max || !strings.ContainsRune(first, rune(s[0])) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !strings.ContainsRune(rest, rune(s[i])) {
			return false
		}
	}
	return true
}

func (s Snapshot) validate() error {
	switch {
	case s.EnvID != "" && !ids.ValidEnvID(s.EnvID):
		return &FieldError{Field: "EnvID", Reason: "must match " + ids.EnvIDPattern + " or be empty"}
	case s.Version != "" && !isVersion(s.Version):
		return &FieldError{Field: "Version", Reason: "must be a version string of [0-9A-Za-z.+~-] or empty"}
	case s.LastResult != "" && s.LastResult != "applied" && s.LastResult != "failed" && s.LastResult != "down":
		return &FieldError{Field: "LastResult", Reason: `must be "applied", "failed", "down" or empty`}
	case s.LastCode != "" && !isCode(string(s.LastCode)):
		return &FieldError{Field: "LastCode", Reason: "must be a stable code of [A-Z0-9_] or empty"}
	case s.LiveSHA != "" && !ids.ValidSHA(s.LiveSHA):
		return &FieldError{Field: "LiveSHA", Reason: "must be 64 lowercase hex digits or empty"}
	case s.LiveSerial < 0:
		return &FieldError{Field: "LiveSerial", Reason: "must not be negative"}
	case s.TickDuration < 0:
		return &FieldError{Field: "TickDuration", Reason: "must not be negative"}
	case s.TokenTTL < 0:
		return &FieldError{Field: "TokenTTL", Reason: "must not be negative"}
	case s.LastRestore != "" && !isRestore(s.LastRestore):
		return &FieldError{Field: "LastRestore", Reason: "must be lowercase letters and dashes, or empty"}
	case s.ExitCode < 0 || s.ExitCode > 255:
		return &FieldError{Field: "ExitCode", Reason: "must be in 0..255"}
	case s.ImagesRemoved < 0 || s.ImagesReclaimedBytes < 0:
		return &FieldError{Field: "ImagesRemoved", Reason: "must not be negative"}
	case s.Verdict != "" && !isRestore(s.Verdict):
		return &FieldError{Field: "Verdict", Reason: "must be lowercase letters, or empty"}
	case s.VerdictExit < 0 || s.VerdictExit > 3:
		return &FieldError{Field: "VerdictExit", Reason: "must be in 0..3"}
	case s.Condition != nil && !isCode(string(s.Condition.Code)):
		return &FieldError{Field: "Condition.Code", Reason: "must be a stable code of [A-Z0-9_]"}
	case s.Condition != nil && (s.Condition.Exit < 0 || s.Condition.Exit > 255 || s.Condition.Runs < 0):
		return &FieldError{Field: "Condition.Exit", Reason: "must be in 0..255, with Runs not negative"}
	case !validDeferral(s.Deferred):
		return &FieldError{Field: "Deferred.Why", Reason: `must be "hold" or "window"`}
	}
	return nil
}

// Format renders s in the Prometheus text exposition format (version 0.0.4), with a
// HELP and a TYPE line for every metric, in a fixed order. It refuses a Snapshot whose
// string fields do not match their patterns (a *FieldError wrapping ErrInvalid).
func Format(s Snapshot) ([]byte, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	gauge := func(name, help, labels string, value string) {
		name = Prefix + name
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n%s%s %s\n", name, help, name, name, labels, value)
	}
	gauge("info", "Agent version, env_id and live bundle sha of this box; always 1.",
		labelSet("env_id", s.EnvID, "version", s.Version, "live_sha", s.LiveSHA), "1")
	gauge("last_run_timestamp_seconds", "Unix time when the last tick ended.",
		"", unixSeconds(s.LastRun))
	gauge("last_checkin_timestamp_seconds", "Unix time of the last successful check-in with monky-tenancy; 0 if never.",
		"", unixSeconds(s.LastCheckin))
	gauge("last_result", "Last reported result (applied, failed, down; empty before the first report) and its code; always 1.",
		labelSet("result", s.LastResult, "code", string(s.LastCode)), "1")
	gauge("tick_duration_seconds", "Duration of the last tick in seconds.",
		"", seconds(s.TickDuration))
	gauge("live_serial", "Serial of the live release; 0 if none.",
		"", strconv.FormatInt(s.LiveSerial, 10))
	gauge("token_ttl_seconds", "Remaining TTL of the OpenBao token in seconds; 0 if the agent holds none.",
		"", seconds(s.TokenTTL))
	latched := "0"
	if s.EnvMismatchLatched {
		latched = "1"
	}
	gauge("env_mismatch_latched", "1 while the AGENT_ENV_MISMATCH latch holds (every run exits 78 until the operator acts).",
		"", latched)
	gauge("exit_code", "Exit code of the last tick: 0 done, 75 temporary, 78 env mismatch, 1 failure.",
		"", strconv.Itoa(s.ExitCode))
	degraded := boolValue(s.Degraded)
	gauge("last_restore", "What became of the box after the last apply that failed after promote (restored-healthy, restored-unhealthy, restore-failed, none, not-restored; empty since a successful apply); 1 when the box is degraded, else 0.",
		labelSet("result", s.LastRestore), degraded)
	gauge("images_removed", "Images the image hygiene of the last apply that removed any removed (images only pruned releases used).",
		"", strconv.Itoa(s.ImagesRemoved))
	gauge("images_reclaimed_bytes", "Sum of the sizes of those images: an upper bound of the space freed (shared layers stay).",
		"", strconv.FormatInt(s.ImagesReclaimedBytes, 10))
	gauge("status", "The status verdict after the last tick (ok, warning, critical, unknown); the value is `monky-deployd status`'s exit code: 0, 1, 2, 3.",
		labelSet("verdict", s.Verdict), strconv.Itoa(s.VerdictExit))
	formatCondition(gauge, s.Condition)
	formatDeferral(gauge, s.Deferred, s.TenancyUnreached)
	if l := s.Live; l != nil {
		formatLive(&b, l)
	}
	return b.Bytes(), nil
}

// formatCondition writes the box's condition: always present, so that an alert on a
// lasting condition has a series to read (code "" and zeros when none).
func formatCondition(gauge func(name, help, labels, value string), c *Condition) {
	var cc Condition
	held := "0"
	if c != nil {
		cc, held = *c, "1"
	}
	exit := ""
	if c != nil {
		exit = strconv.Itoa(cc.Exit)
	}
	gauge("condition", "1 while runs keep ending non-zero, with the latest run's code and exit code; 0 with empty labels once a run ended 0.",
		labelSet("code", string(cc.Code), "exit", exit), held)
	gauge("condition_since_timestamp_seconds", "Unix time when the first run of the condition ended; 0 without a condition.",
		"", unixSeconds(cc.Since))
	gauge("condition_runs", "How many runs in a row have ended non-zero; 0 without a condition.",
		"", strconv.Itoa(cc.Runs))
	gauge("next_attempt_timestamp_seconds", "Unix time when the box tries again by itself where it waits (tenancy's Retry-After, a sha held for an hour); 0: at the next tick.",
		"", unixSeconds(cc.NextAttempt))
}

// formatLive writes the live release's health: nothing more than the observation
// time while docker could not be asked.
func formatLive(b *bytes.Buffer, l *Live) {
	head := func(name, help string) string {
		name = Prefix + name
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
		return name
	}
	name := head("live_observed_timestamp_seconds", "Unix time when the live release's health was last read from docker.")
	fmt.Fprintf(b, "%s %s\n", name, unixSeconds(l.ObservedAt))
	name = head("live_known", "1 when docker answered the last health read of the live release, 0 when it could not be asked.")
	fmt.Fprintf(b, "%s %s\n", name, boolValue(l.Known))
	if !l.Known {
		return
	}
	name = head("live_healthy", "1 when every service of the live release is ready, else 0.")
	fmt.Fprintf(b, "%s %s\n", name, boolValue(l.Healthy))
	services := labelled(l.Services)
	name = head("service_healthy", "1 when the service of the live release is ready (running and healthy, or a one-shot that exited 0), else 0.")
	for _, sv := range services {
		fmt.Fprintf(b, "%s%s %s\n", name, labelSet("service", sv.Name), boolValue(sv.Healthy))
	}
	name = head("service_restarts", "How often docker restarted the service's containers (resets when compose recreates them).")
	for _, sv := range services {
		fmt.Fprintf(b, "%s%s %d\n", name, labelSet("service", sv.Name), max(sv.Restarts, 0))
	}
}

// labelled are the services whose name can be a label value: valid UTF-8, 1 to 128
// bytes (the value is escaped). The names come from docker; one that cannot be shown
// is left out rather than costing the whole file.
func labelled(services []Service) []Service {
	return slices.DeleteFunc(slices.Clone(services), func(sv Service) bool {
		return sv.Name == "" || len(sv.Name) > 128 || !utf8.ValidString(sv.Name)
	})
}

func boolValue(v bool) string {
	if v {
		return "1"
	}
	return "0"
}

// Write renders s (see Format) and replaces the file at path atomically with mode
// FileMode: a temp file in the same directory, fsync, rename, fsync of the directory.
// node_exporter's textfile collector reads only names ending in .prom, so path should
// end in .prom; the temp file does not.
func Write(path string, s Snapshot) error {
	data, err := Format(s)
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(path, data, FileMode); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// labelSet renders {k1="v1",k2="v2"} from alternating names and values.
func labelSet(kv ...string) string {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(kv[i])
		b.WriteString(`="`)
		b.WriteString(escapeLabelValue(kv[i+1]))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// escapeLabelValue escapes backslash, double quote and newline as the text format
// requires. Validated values never contain them; this keeps the output parseable even
// if a pattern is widened later.
func escapeLabelValue(v string) string {
	var b bytes.Buffer
	for _, r := range v {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func unixSeconds(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', -1, 64)
}

func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

// Deferral is an apply the box prepared and did not switch to (deployd.Deferral), in
// a Snapshot.
type Deferral struct {
	// Why is "hold" or "window".
	Why string
	// Until is when the box switches by itself at the latest: the hold's end or the
	// next opening of a window; zero when not known.
	Until time.Time
}

// validDeferral reports whether d is nil or names a known why.
func validDeferral(d *Deferral) bool { return d == nil || d.Why == "hold" || d.Why == "window" }

// formatDeferral writes the deferral and since when tenancy was not reached: always
// present (why "" and zeros when none), so that an alert has a series to read.
func formatDeferral(gauge func(name, help, labels, value string), d *Deferral, unreached time.Time) {
	var dd Deferral
	held := "0"
	if d != nil {
		dd, held = *d, "1"
	}
	gauge("deferred", "1 while an apply waits, prepared and not switched, for a hold set at the box or an apply window (why); 0 with an empty why otherwise.",
		labelSet("why", dd.Why), held)
	gauge("deferred_until_timestamp_seconds", "Unix time when the box switches by itself at the latest (the hold's end, the next window opening); 0 when nothing waits or it is not known.",
		"", unixSeconds(dd.Until))
	gauge("tenancy_unreached_since_timestamp_seconds", "Unix time when the first of the check-ins in a row that did not reach tenancy failed; 0 while check-ins are answered.",
		"", unixSeconds(unreached))
}
