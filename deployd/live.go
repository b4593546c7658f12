package deployd

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/release"
)

// liveTimeout bounds the reading of the live release's health before a check-in, so
// that a docker that hangs delays the heartbeat by this much at most.
const liveTimeout = 5 * time.Second

// LiveHealth is the live release's health as a tick last read it from docker: what
// the check-in's live object carries, and what status and the metrics show.
type LiveHealth struct {
	// SHA is the live release that was looked at.
	SHA string `json:"sha"`
	// ObservedAt is when docker was asked.
	ObservedAt time.Time `json:"observed_at"`
	// Healthy is true when every service of the release is ready; meaningful only when
	// Reason is "".
	Healthy bool `json:"healthy"`
	// Reason says why docker could not be asked, "" when it answered.
	Reason string `json:"reason,omitempty"`
	// Services are the release's services, sorted by name.
	Services []LiveService `json:"services,omitempty"`
}

// LiveService is one service of LiveHealth: what the check-in carries, and the
// agent's verdict.
type LiveService struct {
	tenancy.LiveService
	// Ready is true when the service counts as healthy (compose.ObservedService.Ready).
	Ready bool `json:"ready"`
	// Containers are the IDs of the service's containers, sorted: the next
	// observation inspects them again only if they changed or may have restarted
	// (compose.Client.ObserveAfter).
	Containers []string `json:"containers,omitempty"`
	// InspectedAt is when Restarts was last read by an inspection
	// (compose.ObservedService.InspectedAt).
	InspectedAt time.Time `json:"inspected_at,omitzero"`
}

// liveObservation is h as an earlier observation for compose.Client.ObserveAfter: the
// zero Observation (nothing known) for nil or for a health docker could not tell.
func liveObservation(h *LiveHealth) compose.Observation {
	if h == nil || h.Reason != "" {
		return compose.Observation{}
	}
	obs := compose.Observation{At: h.ObservedAt, Healthy: h.Healthy}
	for _, s := range h.Services {
		obs.Services = append(obs.Services, compose.ObservedService{Name: s.Name, State: s.State, Health: s.Health,
			ExitCode: s.ExitCode, Restarts: s.Restarts, Ready: s.Ready, Containers: s.Containers, InspectedAt: s.InspectedAt})
	}
	return obs
}

// liveForTenancy is h as the check-in carries it; nil for nil.
func liveForTenancy(h *LiveHealth) *tenancy.Live {
	if h == nil {
		return nil
	}
	l := &tenancy.Live{ObservedAt: h.ObservedAt, Healthy: h.Healthy, Reason: h.Reason}
	for _, s := range h.Services {
		l.Services = append(l.Services, s.LiveService)
	}
	return l
}

// judgeLive turns what docker said of the live release sha (obs, read at obs.At, by this
// host's clock, which the next ObserveAfter compares with docker's uptimes) into the
// health a check-in carries, judged against prev, the last observation: a service
// whose restart count rose since then is not ready now. When the release is not
// healthy it logs a warning that names the services and how to read their logs
// (currentLink and project say where); it changes nothing.
func judgeLive(log *slog.Logger, sha string, prev *LiveHealth, obs compose.Observation, currentLink, project string) *LiveHealth {
	h := &LiveHealth{SHA: sha, ObservedAt: obs.At}
	restarted := restartedSince(prev, obs)
	h.Healthy = obs.Healthy && len(restarted) == 0
	var bad []string
	for _, s := range obs.Services {
		ready := s.Ready && !restarted[s.Name]
		h.Services = append(h.Services, LiveService{Ready: ready, Containers: s.Containers, InspectedAt: s.InspectedAt, LiveService: tenancy.LiveService{
			Name: s.Name, State: s.State, Health: s.Health, ExitCode: s.ExitCode, Restarts: s.Restarts}})
		switch {
		case !s.Ready:
			bad = append(bad, describeService(s))
		case restarted[s.Name]:
			bad = append(bad, describeService(s)+" (restarted since the last check-in)")
		}
	}
	if !h.Healthy {
		log.Warn("the live release is not healthy; the agent changes nothing on its own (tenancy sees it in the check-in and decides). Read the logs: cd "+currentLink+" && docker compose -p "+project+" logs --tail 100",
			"live_sha", release.Short(sha), "services", strings.Join(bad, "; "))
	}
	return h
}

// unobservedLive is the health of the live release sha when docker could not be asked at
// at: reason says why (already redacted). It logs a warning that says what to check.
func unobservedLive(log *slog.Logger, sha string, at time.Time, reason string) *LiveHealth {
	log.Warn("could not read the live release's health; the check-in says why and goes out all the same. Is dockerd running? (systemctl status docker)",
		"live_sha", release.Short(sha), "err", reason)
	return &LiveHealth{SHA: sha, ObservedAt: at, Reason: reason}
}

// restartedSince names the services whose restart count rose since prev, the last
// observation of the same release: a service without a healthcheck that crash-loops
// may be seen running at every check-in, and only its restarts tell. A count that
// fell (compose recreated the containers) says nothing.
func restartedSince(prev *LiveHealth, obs compose.Observation) map[string]bool {
	restarted := map[string]bool{}
	if prev == nil || prev.Reason != "" {
		return restarted
	}
	before := map[string]int{}
	for _, s := range prev.Services {
		before[s.Name] = s.Restarts
	}
	for _, s := range obs.Services {
		if n, seen := before[s.Name]; seen && s.Restarts > n {
			restarted[s.Name] = true
		}
	}
	return restarted
}

// describeService is one service that is not ready, for a log line.
func describeService(s compose.ObservedService) string {
	d := s.Name + ": " + s.State
	if s.Health != "" {
		d += ", health " + s.Health
	}
	if s.State == "exited" || s.State == "dead" {
		d += fmt.Sprintf(", exit code %d", s.ExitCode)
	}
	if s.Restarts > 0 {
		d += fmt.Sprintf(", restarted %d times", s.Restarts)
	}
	return d
}
