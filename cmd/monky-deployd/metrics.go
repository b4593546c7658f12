package main

import (
	"time"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/internal/metrics"
)

// snapshot is the metrics snapshot of a tick that ended at now with exit after tick, as
// the box's status (read back after the tick) tells it.
func snapshot(v deployd.Status, now time.Time, tick time.Duration, exit int) metrics.Snapshot {
	snap := metrics.Snapshot{
		EnvID: v.EnvID, Version: v.Version, LastRun: now, TickDuration: tick, ExitCode: exit,
		EnvMismatchLatched: v.Latch != nil && v.Latch.Active, Verdict: string(v.Verdict), VerdictExit: v.Verdict.Exit(),
	}
	if v.LastCheckin != nil {
		snap.LastCheckin = *v.LastCheckin
	}
	if r := v.LastReport; r != nil {
		snap.LastResult, snap.LastCode = r.Result, r.Code
	}
	if e := v.Token.Expires; e != nil {
		snap.TokenTTL = max(e.Sub(now), 0)
	}
	if r := v.LastRestore; r != nil {
		snap.LastRestore, snap.Degraded = r.Result, r.Degraded
	}
	if r := v.LastReclaim; r != nil {
		snap.ImagesRemoved, snap.ImagesReclaimedBytes = r.Images, r.Bytes
	}
	if c := v.Condition; c != nil {
		snap.Condition = &metrics.Condition{Code: c.Code, Exit: c.Exit, Since: c.Since, Runs: c.Runs}
		if c.NextAttempt != nil {
			snap.Condition.NextAttempt = *c.NextAttempt
		}
	}
	if d := v.Deferred; d != nil {
		snap.Deferred = &metrics.Deferral{Why: d.Why, Until: d.Until}
	}
	if o := v.Offline; o != nil {
		snap.TenancyUnreached = o.FailingSince
	}
	if l := v.Live; l != nil {
		snap.LiveSHA, snap.LiveSerial = l.SHA, l.Serial
		if h := l.Health; h != nil {
			snap.Live = &metrics.Live{Known: h.Reason == "", Healthy: h.Healthy, ObservedAt: h.ObservedAt}
			for _, sv := range h.Services {
				snap.Live.Services = append(snap.Live.Services, metrics.Service{Name: sv.Name, Healthy: sv.Ready, Restarts: sv.Restarts})
			}
		}
	}
	return snap
}
