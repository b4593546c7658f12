package deployd

import (
	"context"
	"fmt"
	"slices"

	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/internal/release"
)

// observeLive reads the live release's health for the check-in; nil when nothing is
// live. It never fails: what cannot be read becomes the Reason, and the check-in goes
// out all the same. It changes nothing: an unhealthy release is only told.
func (a *Agent) observeLive(ctx context.Context, st *State) *LiveHealth {
	if st.LiveSHA == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, liveTimeout)
	defer cancel()
	at := a.now()
	obs, err := a.observe(ctx, st)
	if err != nil {
		return unobservedLive(a.log, st.LiveSHA, at, a.red.Redact(err.Error()))
	}
	return judgeLive(a.log, st.LiveSHA, st.Live, obs, a.store.CurrentLink(), a.cfg.Compose.Project)
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
	return cc.ObserveAfter(ctx, liveObservation(st.Live), st.LiveServices, st.LiveOneShots)
}
