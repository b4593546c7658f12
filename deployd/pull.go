package deployd

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/internal/fsutil"
)

// pullTimeout bounds the pull of one image before the lease: a pull that outlives it
// is killed, DOCKER_TIMEOUT (temporary, no lease spent).
const pullTimeout = 15 * time.Minute

// pullWhat is what the pull before the lease does with one image, by its service's
// pull_policy as `docker compose up` reads it.
type pullWhat int

const (
	pullSkip    pullWhat = iota // built, or known only after the login: compose up's
	pullMissing                 // pulled when the box does not hold it
	pullAlways                  // pulled every apply
	pullNever                   // never pulled: the box must hold it
)

// pullPolicy maps a service's image to what the pull before the lease does with it.
// Compose builds a service with a build section (pull_policy build, or missing with
// no image), so it is left to compose up; so is an image whose reference holds a
// secret. daily, weekly and every_<duration> pull on a schedule compose keeps:
// before the lease they count as missing.
func pullPolicy(im bundle.Image) pullWhat {
	switch {
	case im.Build, im.FromSecret, im.Ref == "", im.PullPolicy == "build":
		return pullSkip
	case im.PullPolicy == "always":
		return pullAlways
	case im.PullPolicy == "never":
		return pullNever
	}
	return pullMissing
}

// pullImages pulls, before the lease, the images compose up would pull, so that a
// missing image or tag, a registry outage or a full data root costs no lease
// (docs/ARCHITECTURE.md, "Images before the lease"). It uses the docker CLI, with its
// registry credentials, as compose does.
func (t *tick) pullImages(ctx context.Context, images []bundle.Image) error {
	cli, err := t.a.dockerCLI()
	if err != nil {
		return &Error{Op: "pull", Err: err}
	}
	pulls, err := t.toPull(ctx, cli, images)
	if err != nil || len(pulls) == 0 {
		return err
	}
	if err := t.dataRootRoom(ctx); err != nil {
		return err
	}
	for _, im := range pulls {
		t.log.Info("pulling an image before asking for a lease", "service", im.Service, "image", im.Ref)
		pctx, cancel := context.WithTimeout(ctx, pullTimeout)
		err := cli.Pull(pctx, im.Ref, compose.PullOptions{})
		cancel()
		if err != nil {
			return t.pullFailed(ctx, im, err)
		}
	}
	t.log.Info("pulled the release's images; asking for a lease", "images", len(pulls))
	return nil
}

// toPull is what pullImages pulls, once per reference: the images the box does not
// hold (one docker image inspect when it holds them all) and those whose pull_policy
// is always. An image of pull_policy never that the box does not hold is
// IMAGE_MISSING.
func (t *tick) toPull(ctx context.Context, cli *compose.Client, images []bundle.Image) ([]bundle.Image, error) {
	var pulls, check []bundle.Image
	seen := map[string]bool{}
	for _, im := range images {
		what := pullPolicy(im)
		if what == pullSkip || seen[im.Ref] {
			continue
		}
		seen[im.Ref] = true
		if what == pullAlways {
			pulls = append(pulls, im)
		} else {
			check = append(check, im)
		}
	}
	missing, err := cli.MissingImages(ctx, refsOf(check))
	if err != nil {
		return nil, t.pullFailed(ctx, bundle.Image{Service: "(docker image inspect)"}, err)
	}
	for _, im := range check {
		switch {
		case !slices.Contains(missing, im.Ref):
		case pullPolicy(im) == pullNever:
			return nil, t.pullFailed(ctx, im, &compose.Error{Op: "image inspect", Kind: compose.ErrImageMissing,
				Detail: "pull_policy is never and this box does not hold " + im.Ref})
		default:
			pulls = append(pulls, im)
		}
	}
	return pulls, nil
}

// refsOf lists the references of images.
func refsOf(images []bundle.Image) []string {
	refs := make([]string, 0, len(images))
	for _, im := range images {
		refs = append(refs, im.Ref)
	}
	return refs
}

// pullFailed logs what a failed pull means and returns it as the step's error.
func (t *tick) pullFailed(ctx context.Context, im bundle.Image, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	e := &Error{Op: "pull " + im.Service, Err: err}
	switch code := CodeOf(e); code {
	case codes.ImageMissing:
		t.log.Error("an image of the release is not in its registry, or the registry denies it to this box; no lease taken, not remembered against the sha. Push the image, fix its reference in the renderer, or docker login to its registry as root; the next tick pulls again",
			"code", code, "service", im.Service, "image", im.Ref, "err", err)
	case codes.RegistryUnavailable:
		t.log.Warn("the image registry cannot be reached (the network, TLS, its 5xx or its rate limit, by what docker said); no lease taken, exiting 75. Check that this box reaches it (docker pull as root); the next tick pulls again",
			"code", code, "service", im.Service, "image", im.Ref, "err", err)
	case codes.DockerTimeout:
		t.log.Warn("docker did not finish by itself: it outlived the agent's bound for it, or a signal the agent did not send killed it; the box is slow or dockerd hangs, nothing is said of the registry. No lease taken, exiting 75; the next tick pulls again. If it lasts: systemctl status docker, journalctl -u docker",
			"code", code, "service", im.Service, "image", im.Ref, "pull_timeout", pullTimeout, "err", err)
	case codes.DockerUnavailable:
		t.log.Error("docker cannot be reached to pull an image; no lease taken, not remembered against the sha. Start docker (systemctl status docker); the next tick pulls again",
			"code", code, "service", im.Service, "image", im.Ref, "err", err)
	case codes.DiskFull:
		t.log.Error("docker's data root has no space left for an image; no lease taken, not remembered against the sha. Free space there (docker image prune, df -h); the next tick pulls again",
			"code", code, "service", im.Service, "image", im.Ref, "err", err)
	case codes.PullFailed:
		t.log.Error("docker could not pull an image of the release for a reason of this box, neither the registry's nor the network's; no lease taken, reported, not remembered against the sha. Read what docker said (err) and journalctl -u docker; the next tick pulls again",
			"code", code, "service", im.Service, "image", im.Ref, "err", err)
	default:
		t.log.Error("could not pull an image of the release; no lease taken; err says what failed",
			"code", code, "service", im.Service, "image", im.Ref, "err", err)
	}
	return e
}

// dataRootRoom refuses the pulls when docker's data root, on this machine, has less
// free space than the box keeps (min_free_mb): the images would fill it. The Engine
// API's /info names the data root; without the Engine API, or with a daemon on
// another machine, there is nothing to measure here and the pulls go ahead (a pull
// that meets a full disk is DISK_FULL, still before the lease).
func (t *tick) dataRootRoom(ctx context.Context) error {
	if t.a.engine == nil || !t.a.engine.Endpoint().Local() || t.a.cfg.MinFreeMB <= 0 {
		return nil
	}
	root, err := t.a.engine.DataRoot(ctx)
	if err != nil {
		t.log.Warn("could not ask docker for its data root; pulling without checking its free space", "err", err)
		return nil
	}
	space, err := fsutil.SpaceOf(root)
	if err != nil {
		t.log.Warn("could not measure the free space of docker's data root; pulling without checking it", "data_root", root, "err", err)
		return nil
	}
	if space.FreeMB >= t.a.cfg.MinFreeMB {
		return nil
	}
	t.log.Error("docker's data root has less free space than the box keeps; not pulling, no lease taken. Free space there (docker image prune); the next tick tries again",
		"code", codes.DiskLow, "data_root", root, "free_mb", space.FreeMB, "min_free_mb", t.a.cfg.MinFreeMB)
	return &Error{Op: "pull", Code: codes.DiskLow,
		Err: fmt.Errorf("docker's data root %s has %d MiB free, below min_free_mb %d: the release's images would not fit", root, space.FreeMB, t.a.cfg.MinFreeMB)}
}
