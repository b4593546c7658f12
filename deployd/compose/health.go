package compose

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Defaults of WaitOptions.
const (
	DefaultHealthTimeout = 5 * time.Minute
	// DefaultHealthPoll is the longest pause between two ps calls when
	// WaitOptions.Poll is zero: the pauses start at minHealthPoll and double up to it,
	// so that a release that is ready within a second is seen within a few hundred
	// milliseconds, and a slow one costs one ps call every half second.
	DefaultHealthPoll = 500 * time.Millisecond
	// minHealthPoll is the first pause of the default schedule.
	minHealthPoll = 50 * time.Millisecond
)

// WaitOptions tunes WaitHealthy. Zero values are documented defaults.
type WaitOptions struct {
	// Services are the services expected from the bundle. Empty: every service ps shows.
	Services []string
	// Timeout bounds the whole wait. Default DefaultHealthTimeout (5m).
	Timeout time.Duration
	// Poll is the pause between two ps calls. Zero: pauses that start at 50ms and
	// double up to DefaultHealthPoll (500ms).
	Poll time.Duration
	// DockerGrace is how long the wait goes on while the docker daemon cannot be
	// reached (a dockerd restart) before it ends with ErrDockerUnavailable. Default
	// DefaultDockerGrace (30s).
	DockerGrace time.Duration
	// Progress is how often the wait logs what it still waits for (and a read of
	// the containers that keeps failing). Default DefaultProgress (20s).
	Progress time.Duration
}

// StateMissing is the State of a service that has no container at all.
const StateMissing = "missing"

// verdict of one service at one poll.
type verdict int

const (
	notReady verdict = iota
	ready
	failed
)

// WaitHealthy polls ps until every expected service is ready (see the package
// documentation), and returns the state of each expected service, sorted by name, also
// on failure. It fails fast with ErrUnhealthy and times out with ErrHealthTimeout,
// both naming the services at fault. A cancelled ctx ends the wait with ctx's error.
func (c *Client) WaitHealthy(ctx context.Context, opts WaitOptions) ([]ServiceState, error) {
	opts = opts.withDefaults()
	pause := opts.Poll
	if pause <= 0 {
		pause = minHealthPoll
	}
	start := time.Now()
	deadline := start.Add(opts.Timeout)
	seen := map[string]sighting{} // running containers of the last poll, by ID
	var states []ServiceState
	var lastPSErr error
	var readErrs repeated // the failed reads since the last good one
	progress := start
	for poll := 1; ; poll++ {
		cs, err := c.containers(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return states, ctx.Err()
			}
			lastPSErr = err
			if readErrs.note(time.Now(), opts.Progress) {
				c.log.Warn("reading the containers failed during the health wait; trying again at the next poll",
					"failures", readErrs.count, "since", readErrs.first.Round(time.Second).Format(time.RFC3339), "error", err)
			}
			if errors.Is(err, ErrDockerUnavailable) && time.Since(readErrs.first) >= opts.DockerGrace {
				c.log.Error("the docker daemon cannot be reached during the health wait; giving up. Start docker (systemctl status docker); the next tick applies again",
					"for", time.Since(readErrs.first).Round(time.Second), "error", err)
				return states, &Error{Op: "wait", Kind: ErrDockerUnavailable, ExitCode: -1, Err: err}
			}
		} else {
			lastPSErr = nil
			readErrs = repeated{}
			var bad, waiting []string
			var details []string
			states, bad, waiting, details = evaluate(opts.Services, cs, seen)
			if len(bad) > 0 {
				c.log.Error("services failed their health check; read their logs: "+c.hint("logs --tail 100 "+strings.Join(bad, " ")),
					"services", bad, "detail", strings.Join(details, "; "), "dir", c.dir,
					"after", time.Since(start).Round(time.Millisecond))
				return states, &Error{Op: "wait", Kind: ErrUnhealthy, ExitCode: -1, Services: bad,
					Detail: strings.Join(details, "; ")}
			}
			if len(waiting) == 0 {
				c.log.Info("all services ready", "services", len(states),
					"after", time.Since(start).Round(time.Millisecond), "polls", poll)
				return states, nil
			}
			if now := time.Now(); now.Sub(progress) >= opts.Progress {
				progress = now
				c.log.Info("waiting for services to become ready", "services", waiting, "detail", strings.Join(details, "; "),
					"waited", now.Sub(start).Round(time.Second), "timeout", opts.Timeout)
			} else {
				c.log.Debug("services not ready yet", "services", waiting, "detail", strings.Join(details, "; "), "poll", poll)
			}
		}
		now := time.Now()
		if !now.Before(deadline) {
			return states, c.timedOut(opts, states, lastPSErr)
		}
		wait := min(pause, deadline.Sub(now))
		if opts.Poll <= 0 {
			pause = min(2*pause, DefaultHealthPoll)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return states, ctx.Err()
		case <-t.C:
		}
	}
}

// withDefaults fills the zero fields of o with the package's defaults.
func (o WaitOptions) withDefaults() WaitOptions {
	if o.Timeout <= 0 {
		o.Timeout = DefaultHealthTimeout
	}
	if o.DockerGrace <= 0 {
		o.DockerGrace = DefaultDockerGrace
	}
	if o.Progress <= 0 {
		o.Progress = DefaultProgress
	}
	return o
}

// timedOut is the health wait's end at its deadline: the services not ready yet,
// or the docker daemon if it could not be read at the last poll.
func (c *Client) timedOut(opts WaitOptions, states []ServiceState, lastPSErr error) error {
	waiting := notReadyNames(opts.Services, states)
	detail := describe(states, waiting)
	c.log.Error("services not ready before the health timeout; read their logs ("+c.hint("logs --tail 100 "+strings.Join(waiting, " "))+
		"), or raise compose.health_timeout if they need longer to start",
		"services", waiting, "timeout", opts.Timeout, "detail", detail, "dir", c.dir)
	if errors.Is(lastPSErr, ErrDockerUnavailable) {
		return &Error{Op: "wait", Kind: ErrDockerUnavailable, ExitCode: -1, Err: lastPSErr}
	}
	return &Error{Op: "wait", Kind: ErrHealthTimeout, ExitCode: -1, Services: waiting,
		Detail: detail, Err: lastPSErr}
}

// settle is how long a container without a healthcheck must be seen running before
// it counts as ready: a one-shot that fails a moment after it starts must not pass
// for a service. Polls through the Engine API come milliseconds apart, so "seen at
// two polls" alone would not do.
const settle = time.Second

// sighting is a container seen running at the previous poll.
type sighting struct {
	uptime    time.Duration
	hasUptime bool
	// since is when the container was first seen running (by this wait's clock).
	since time.Time
	// snapshot marks the sightings of Observe: no earlier poll, every running
	// container counts as settled.
	snapshot bool
}

// evaluate judges every expected service from one ps output. seen holds the running
// containers of the previous poll (to see restarts that ps shows as running, and to
// let containers without a healthcheck settle); evaluate updates it.
// details describe the failed services when there are any, else the waiting ones.
func evaluate(expected []string, cs []Container, seen map[string]sighting) (states []ServiceState, bad, waiting, details []string) {
	var badDetails []string
	byService := map[string][]Container{}
	for _, ctr := range cs {
		byService[ctr.Service] = append(byService[ctr.Service], ctr)
	}
	names := slices.Clone(expected)
	if len(names) == 0 {
		for name := range byService {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	for _, name := range names {
		ctrs := byService[name]
		if len(ctrs) == 0 {
			states = append(states, ServiceState{Name: name, State: StateMissing})
			waiting = append(waiting, name)
			details = append(details, name+": no container")
			continue
		}
		worst, worstWhy, worstCtr := ready, "", ctrs[0]
		for _, ctr := range ctrs {
			v, why := judge(ctr, seen)
			if v == failed || (v == notReady && worst == ready) {
				worst, worstWhy, worstCtr = v, why, ctr
			}
			if v == failed {
				break
			}
		}
		states = append(states, ServiceState{Name: name, State: worstCtr.State, Health: worstCtr.Health})
		switch worst {
		case failed:
			bad = append(bad, name)
			badDetails = append(badDetails, name+": "+worstWhy)
		case notReady:
			waiting = append(waiting, name)
			details = append(details, name+": "+worstWhy)
		}
	}
	prev := maps.Clone(seen)
	clear(seen)
	now := time.Now()
	for _, ctr := range cs {
		if ctr.State == "running" {
			up, ok := minUptime(ctr.Status)
			since := now
			if p, was := prev[ctr.ID]; was {
				since = p.since
			}
			seen[ctr.ID] = sighting{uptime: up, hasUptime: ok, since: since}
		}
	}
	if len(bad) > 0 {
		details = badDetails
	}
	return states, bad, waiting, details
}

// judge says whether one container is ready, not yet, or failed, and why.
func judge(ctr Container, seen map[string]sighting) (verdict, string) {
	switch ctr.State {
	case "dead":
		return failed, "container is dead"
	case "restarting":
		return failed, "container is restarting (restart loop)"
	case "exited":
		if ctr.ExitCode != 0 {
			return failed, fmt.Sprintf("exited with code %d", ctr.ExitCode)
		}
		return ready, "exited 0 (one-shot, done)"
	case "running":
		prev, wasRunning := seen[ctr.ID]
		if up, ok := minUptime(ctr.Status); ok && wasRunning && prev.hasUptime && up < prev.uptime {
			return failed, "container restarted between two polls (restart loop)"
		}
		switch ctr.Health {
		case "healthy":
			return ready, "running, healthy"
		case "":
			switch up, ok := minUptime(ctr.Status); {
			case prev.snapshot:
				return ready, "running"
			case !wasRunning:
				return notReady, "running, settling (seen at one poll so far)"
			case (ok && up >= settle) || time.Since(prev.since) >= settle:
				return ready, "running"
			default:
				return notReady, "running, settling (up for less than " + settle.String() + ")"
			}
		case "unhealthy":
			return failed, "unhealthy"
		default:
			return notReady, "health " + ctr.Health
		}
	case "":
		return notReady, "no state"
	default:
		return notReady, "container is " + ctr.State
	}
}

func notReadyNames(expected []string, states []ServiceState) []string {
	if len(states) == 0 {
		names := slices.Clone(expected)
		slices.Sort(names)
		return slices.Compact(names)
	}
	var names []string
	for _, s := range states {
		if (s.State != "running" || (s.Health != "" && s.Health != "healthy")) && s.State != "exited" {
			names = append(names, s.Name)
		}
	}
	return names
}

func describe(states []ServiceState, names []string) string {
	var parts []string
	for _, s := range states {
		if !slices.Contains(names, s.Name) {
			continue
		}
		switch {
		case s.State == StateMissing:
			parts = append(parts, s.Name+": no container")
		case s.Health != "":
			parts = append(parts, s.Name+": "+s.State+", health "+s.Health)
		default:
			parts = append(parts, s.Name+": "+s.State)
		}
	}
	return strings.Join(parts, "; ")
}

var uptimeRe = regexp.MustCompile(`^Up (Less than a second|About a minute|About an hour|(\d+) (second|minute|hour|day|week|month|year)s?)`)

// maxUptime bounds the uptimes minUptime reads.
const maxUptime = 100 * 365 * 24 * time.Hour

// minUptime is the least time a running container can have been up when docker
// describes it with status. Docker's wording grows monotonically with time, and so does
// minUptime: a smaller value at a later poll means the container was restarted. It is
// read from status ("Up 2 hours (healthy)"): docker writes the uptime with
// go-units' HumanDuration, which truncates seconds and minutes and rounds hours, so
// "2 hours" is at least an hour and a half. ok is false for a status that is not an
// uptime.
func minUptime(status string) (time.Duration, bool) {
	m := uptimeRe.FindStringSubmatch(status)
	if m == nil {
		return 0, false
	}
	switch m[1] {
	case "Less than a second":
		return 0, true
	case "About a minute":
		return time.Minute, true
	case "About an hour":
		return time.Hour, true
	}
	n, err := strconv.Atoi(m[2])
	if err != nil || n < 0 {
		return 0, false
	}
	// Lower bounds: seconds and minutes are truncated; hours are rounded (int(d.Hours()
	// + 0.5)), and days, weeks and months are counted from those rounded hours, so
	// each loses half an hour; years are truncated hours again.
	var up time.Duration
	switch m[3] {
	case "second":
		up = time.Second
	case "minute":
		up = time.Minute
	case "hour":
		up = time.Hour
	case "day":
		up = 24 * time.Hour
	case "week":
		up = 7 * 24 * time.Hour
	case "month":
		up = 30 * 24 * time.Hour
	case "year":
		up = 365 * 24 * time.Hour
	default:
		return 0, false
	}
	if int64(n) > int64(maxUptime/up) {
		return 0, false // no container has been up for a century
	}
	up *= time.Duration(n)
	if m[3] != "second" && m[3] != "minute" && m[3] != "year" {
		up = max(up-30*time.Minute, 0)
	}
	return up, true
}

// DefaultDockerGrace is WaitOptions.DockerGrace's default.
const DefaultDockerGrace = 30 * time.Second

// DefaultProgress is WaitOptions.Progress's default.
const DefaultProgress = 20 * time.Second

// repeated counts a warning that repeats, so that it is logged once and then at most
// once every period, with how often it happened.
type repeated struct {
	count        int
	first, shown time.Time
}

// note counts one more occurrence at now and reports whether to log it.
func (r *repeated) note(now time.Time, period time.Duration) bool {
	r.count++
	if r.count == 1 {
		r.first, r.shown = now, now
		return true
	}
	if now.Sub(r.shown) >= period {
		r.shown = now
		return true
	}
	return false
}
