package deployd

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"

	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/internal/fsutil"
	"github.com/monky/monky-deployd/internal/release"
)

// confirmLive records that the live release came up healthy: its services as the
// health wait saw them, and which of them were one-shots already done.
func confirmLive(s *State, states []compose.ServiceState) {
	setServing(s, release.Confirm(serving(s)))
	s.LiveServices, s.LiveOneShots = nil, []string{}
	for _, st := range states {
		s.LiveServices = append(s.LiveServices, st.Name)
		if st.State == "exited" {
			s.LiveOneShots = append(s.LiveOneShots, st.Name)
		}
	}
}

// composeFor returns a compose client for the release of sha, whose manifest names
// the compose files. The project directory is the release's real path, not
// `current`: a changed bind-mounted file then has a new source path, so compose
// recreates exactly the containers that use it. The agent's labels file comes last
// (release.Store.ComposeFiles): it makes compose recreate the containers whose
// configs or secrets changed.
func (a *Agent) composeFor(sha string, files []string) (*compose.Client, error) {
	return compose.New(compose.Config{
		Docker:  a.cfg.Compose.Docker,
		Project: a.cfg.Compose.Project,
		Dir:     a.store.Dir(sha),
		Files:   a.store.ComposeFiles(sha, files),
		Env:     a.opts.DockerEnv,
		Logger:  a.log,
		Reader:  a.reader(),
	})
}

// learnReleaseSecrets registers the secret values in the .env of a staged release with
// the redactor. A tick that resumes, restores or takes down a release read none of
// them from OpenBao, yet compose's output and the containers' logs may print them.
func (a *Agent) learnReleaseSecrets(sha string, m bundle.Manifest) {
	if len(m.Secrets) == 0 {
		return
	}
	values, err := a.store.EnvValues(sha, slices.Sorted(maps.Keys(m.Secrets)))
	if err != nil {
		a.log.Warn("could not read the release's .env to redact its secrets from compose's output",
			"path", filepath.Join(a.store.Dir(sha), bundle.EnvFileName), "err", err)
		return
	}
	for _, v := range values {
		a.red.Add(v)
	}
}

// dockerVersion is the docker server version for the check-in. It is kept in the
// state for an hour, so that the idle tick (one process per timer run) runs no
// subprocess.
func (a *Agent) dockerVersion(ctx context.Context, st *State) string {
	now := a.now()
	if dockerVersionFresh(st, now) {
		return st.DockerVersion
	}
	v, err := a.readDockerVersion(ctx)
	if err != nil {
		a.log.Debug("could not read the docker version; the check-in sends none", "err", err)
	}
	st.DockerVersion, st.DockerVersionAt = v, now
	return v
}

// readDockerVersion asks the Engine API, or docker version.
func (a *Agent) readDockerVersion(ctx context.Context) (string, error) {
	if a.engine != nil {
		v, err := a.engine.Version(ctx)
		if err == nil && !compose.ValidServerVersion(v) {
			return "", fmt.Errorf("the docker engine answered a server version that is not one (%d bytes)", len(v))
		}
		return v, err
	}
	cc, err := a.dockerCLI()
	if err != nil {
		return "", err
	}
	return cc.DockerVersion(ctx)
}

// dockerCLI returns a client of the docker CLI for what belongs to no release (the
// version, image pulls), run in deploy_dir (or its nearest existing parent).
func (a *Agent) dockerCLI() (*compose.Client, error) {
	return compose.New(compose.Config{Docker: a.cfg.Compose.Docker, Project: a.cfg.Compose.Project,
		Dir: fsutil.ExistingParent(a.cfg.DeployDir), Env: a.opts.DockerEnv, Logger: a.log})
}
