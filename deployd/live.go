package deployd

import (
	"context"
	"fmt"
	"slices"
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
}

// tenancy is h as the check-in carries it.
func (h *LiveHealth) tenancy() *tenancy.Live {
	if h == nil {
		return nil
	}
	l := &tenancy.Live{ObservedAt: h.ObservedAt, Healthy: h.Healthy, Reason: h.Reason}
	for _, s := range h.Services {
		l.Services = append(l.Services, s.LiveService)
	}
	return l
}

// observeLive reads the live release's health for the check-in; nil when nothing is
// live. It never fails: what cannot be read becomes the Reason, and the check-in goes
// out all the same. It changes nothing: an unhealthy release is only told.
func (a *Agent) observeLive(ctx context.Context, st *State) *LiveHealth {
	if st.LiveSHA == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, liveTimeout)
	defer cancel()
	h := &LiveHealth{SHA: st.LiveSHA, ObservedAt: a.now()}
	obs, err := a.observe(ctx, st)
	if err != nil {
		h.Reason = a.red.Redact(err.Error())
		a.log.Warn("could not read the live release's health; the check-in says why and goes out all the same. Is dockerd running? (systemctl status docker)",
			"live_sha", release.Short(st.LiveSHA), "err", h.Reason)
		return h
	}
	restarted := restartedSince(st.Live, obs)
	h.Healthy = obs.Healthy && len(restarted) == 0
	var bad []string
	for _, s := range obs.Services {
		ready := s.Ready && !restarted[s.Name]
		h.Services = append(h.Services, LiveService{Ready: ready, LiveService: tenancy.LiveService{
			Name: s.Name, State: s.State, Health: s.Health, ExitCode: s.ExitCode, Restarts: s.Restarts}})
		switch {
		case !s.Ready:
			bad = append(bad, describeService(s))
		case restarted[s.Name]:
			bad = append(bad, describeService(s)+" (restarted since the last check-in)")
		}
	}
	if !h.Healthy {
		a.log.Warn("the live release is not healthy; the agent changes nothing on its own (tenancy sees it in the check-in and decides). Read the logs: cd "+a.store.CurrentLink()+" && docker compose -p "+a.cfg.Compose.Project+" logs --tail 100",
			"live_sha", release.Short(st.LiveSHA), "services", strings.Join(bad, "; "))
	}
	return h
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

// observe asks docker about the live release's services. Through the Engine API the
// project name is all it takes; the CLI (docker compose ps) also needs the release's
// compose files, from its manifest. Services not recorded (a repaired state, one
// written by an older agent) are read from the release once and recorded.
func (a *Agent) observe(ctx context.Context, st *State) (compose.Observation, error) {
	var files []string
	switch {
	case len(st.LiveServices) == 0:
		rel, err := a.store.Read(ctx, st.LiveSHA, a.expect())
		if err != nil {
			return compose.Observation{}, fmt.Errorf("the live release %s cannot be read: %w", release.Short(st.LiveSHA), err)
		}
		files, st.LiveServices = rel.Manifest.ComposeFiles, slices.Clone(rel.Services)
	case a.engine == nil:
		m, err := a.store.Manifest(st.LiveSHA)
		if err != nil {
			return compose.Observation{}, fmt.Errorf("the live release %s cannot be read: %w", release.Short(st.LiveSHA), err)
		}
		files = m.ComposeFiles
	}
	cc, err := a.composeFor(st.LiveSHA, files)
	if err != nil {
		return compose.Observation{}, err
	}
	return cc.Observe(ctx, st.LiveServices, st.LiveOneShots)
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
