package deployd

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/internal/fsutil"
	"github.com/monky/monky-deployd/internal/release"
)

// recordImages remembers the images the release's containers run right after compose
// up, as the engine resolved them (IDs), so that they can be removed once the release
// is pruned — a release that then fails its health check included. Without
// the Engine API (a DOCKER_HOST the agent's client does not speak) there is no image
// hygiene.
func (t *tick) recordImages(ctx context.Context, sha string) {
	if t.a.engine == nil {
		return
	}
	ids, err := t.a.engine.ProjectImages(ctx, t.a.cfg.Compose.Project)
	if err != nil {
		t.log.Warn("could not read the images of the live release; they will not be removed when it is pruned", "err", err)
		return
	}
	if t.st.Images == nil {
		t.st.Images = map[string][]string{}
	}
	t.st.Images[sha] = slices.Sorted(maps.Keys(ids))
}

// hygieneTimeout bounds the image hygiene of an apply as a whole, so that a slow
// daemon delays the applied report by this much at most.
const hygieneTimeout = 2 * time.Minute

// reclaimImages removes, by ID, the images that only releases no longer staged (the
// ones Prune just removed, or gone otherwise) named, and that no container uses. It
// never removes an image the agent's releases did not name, never forces, and never
// prunes: what docker refuses stays, and is tried again after the next apply. While a
// staged release has no record of its images (staged by an older agent), nothing is
// removed: an image it shares with a pruned release would look unused.
func (t *tick) reclaimImages(ctx context.Context) *Reclaim {
	if t.a.engine == nil {
		return nil
	}
	for _, sha := range t.a.store.Staged() {
		if _, ok := t.st.Images[sha]; !ok {
			why := "applied by an older agent, or its record was lost with a state.json that did not parse"
			if t.st.Rebuilt != nil {
				why = "its record was lost with the state.json that did not parse"
			}
			t.log.Info("image hygiene waits: a kept release has no record of its images ("+why+"); it runs once that release is pruned",
				"release", release.Short(sha))
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, hygieneTimeout)
	defer cancel()
	gone := func(sha string) bool { return !t.a.store.Has(sha) }
	o, err := t.a.orphanImages(ctx, t.st, gone)
	if err != nil {
		t.log.Warn("image hygiene skipped: could not ask docker which images are in use; the next apply tries again", "err", err)
		return nil
	}
	pending := map[string]bool{}
	for _, id := range o.held {
		pending[id] = true
	}
	if len(o.held) > 0 {
		t.log.Info("image hygiene kept images of pruned releases that a container outside the live release still uses; the next apply tries again",
			"images", strings.Join(o.held, " "))
	}
	r := &Reclaim{At: t.a.now()}
	for _, id := range o.ids {
		if err := t.a.engine.RemoveImage(ctx, id); err != nil {
			r.Failed++
			pending[id] = true
			t.log.Warn("could not remove an image only pruned releases used; the next apply tries again", "image", id, "err", err)
			continue
		}
		r.Images++
		r.Bytes += o.sizes[id]
	}
	t.keepPending(gone, pending)
	if r.Images == 0 && r.Failed == 0 {
		return nil
	}
	t.log.Info("image hygiene: "+r.String(), "images", r.Images, "bytes", r.Bytes)
	return r
}

// keepPending keeps, of the records of the releases gone names, only the images
// still pending (in use, or a removal that failed), and drops a record with none:
// the records never outgrow the images waiting to be removed.
func (t *tick) keepPending(gone func(sha string) bool, pending map[string]bool) {
	for sha, ids := range t.st.Images {
		if !gone(sha) {
			continue
		}
		ids = slices.DeleteFunc(ids, func(id string) bool { return !pending[id] })
		if len(ids) == 0 {
			delete(t.st.Images, sha)
		} else {
			t.st.Images[sha] = ids
		}
	}
}

// orphans are the images of releases being let go: those that can be removed now
// (ids, sorted) and those a container still uses (held, sorted), with the size of
// every image docker lists.
type orphans struct {
	ids, held []string
	sizes     map[string]int64
}

// orphanImages are the images named only by releases drop names (by the records of
// recordImages), split into those no container uses and those one does. Empty
// without the Engine API.
func (a *Agent) orphanImages(ctx context.Context, st *State, drop func(sha string) bool) (orphans, error) {
	var o orphans
	if a.engine == nil || len(st.Images) == 0 {
		return o, nil
	}
	candidates, kept := map[string]bool{}, map[string]bool{}
	for sha, ids := range st.Images {
		for _, id := range ids {
			if drop(sha) {
				candidates[id] = true
			} else {
				kept[id] = true
			}
		}
	}
	if len(candidates) == 0 {
		return o, nil
	}
	used, err := a.engine.ImagesInUse(ctx)
	if err != nil {
		return o, err
	}
	images, err := a.engine.Images(ctx)
	if err != nil {
		return o, err
	}
	o.sizes = map[string]int64{}
	for _, im := range images {
		o.sizes[im.ID] = im.Size
	}
	for id := range candidates {
		_, exists := o.sizes[id]
		switch {
		case !exists || kept[id]:
		case used[id]:
			o.held = append(o.held, id)
		default:
			o.ids = append(o.ids, id)
		}
	}
	slices.Sort(o.ids)
	slices.Sort(o.held)
	return o, nil
}

// freeableNote is what a DISK_LOW refusal adds: how much removing the images that
// only the releases older than the restore target use would free. "" when nothing
// (or docker cannot say).
func (t *tick) freeableNote(ctx context.Context) string {
	older := func(sha string) bool { return sha != t.st.LiveSHA && sha != t.st.PreviousSHA }
	o, err := t.a.orphanImages(ctx, t.st, older)
	if err != nil || len(o.ids) == 0 {
		return ""
	}
	var total int64
	for _, id := range o.ids {
		total += o.sizes[id]
	}
	return fmt.Sprintf("images only releases older than the live and the previous one use could free up to %s (%d images: lower compose.keep_releases, or docker image rm %s)",
		mib(total), len(o.ids), strings.Join(o.ids, " "))
}

// pullTimeout bounds the pull of one image before the lease: a pull that outlives it
// is killed, DOCKER_TIMEOUT (temporary, no lease spent).
const pullTimeout = 15 * time.Minute

// pullWhat is what the pull before the lease does with one image, by its service's
// pull_policy as `docker compose up` reads it.
type pullWhat int

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

// pullFailures is what the log says of a failed pull, by its code: what happened
// and what to do next. A code not listed gets pullFailedOther.
var pullFailures = map[codes.Code]struct {
	level slog.Level
	msg   string
}{
	codes.ImageMissing:        {slog.LevelError, "an image of the release is not in its registry, or the registry denies it to this box; no lease taken, not remembered against the sha. Push the image, fix its reference in the renderer, or docker login to its registry as root; the next tick pulls again"},
	codes.RegistryUnavailable: {slog.LevelWarn, "the image registry cannot be reached (the network, TLS, its 5xx or its rate limit, by what docker said); no lease taken, exiting 75. Check that this box reaches it (docker pull as root); the next tick pulls again"},
	codes.DockerTimeout:       {slog.LevelWarn, "docker did not finish by itself: it outlived the agent's bound for it (pull_timeout), or a signal the agent did not send killed it; the box is slow or dockerd hangs, nothing is said of the registry. No lease taken, exiting 75; the next tick pulls again. If it lasts: systemctl status docker, journalctl -u docker"},
	codes.DockerUnavailable:   {slog.LevelError, "docker cannot be reached to pull an image; no lease taken, not remembered against the sha. Start docker (systemctl status docker); the next tick pulls again"},
	codes.DiskFull:            {slog.LevelError, "docker's data root has no space left for an image; no lease taken, not remembered against the sha. Free space there (docker image prune, df -h); the next tick pulls again"},
	codes.PullFailed:          {slog.LevelError, "docker could not pull an image of the release for a reason of this box, neither the registry's nor the network's; no lease taken, reported, not remembered against the sha. Read what docker said (err) and journalctl -u docker; the next tick pulls again"},
}

const pullFailedOther = "could not pull an image of the release; no lease taken; err says what failed"

// pullFailed logs what a failed pull means and returns it as the step's error.
func (t *tick) pullFailed(ctx context.Context, im bundle.Image, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	e := &Error{Op: "pull " + im.Service, Err: err}
	code := CodeOf(e)
	f, ok := pullFailures[code]
	if !ok {
		f.level, f.msg = slog.LevelError, pullFailedOther
	}
	t.log.Log(ctx, f.level, f.msg, "code", code, "service", im.Service, "image", im.Ref,
		"pull_timeout", pullTimeout, "err", err)
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

const (
	pullSkip    pullWhat = iota // built, or known only after the login: compose up's
	pullMissing                 // pulled when the box does not hold it
	pullAlways                  // pulled every apply
	pullNever                   // never pulled: the box must hold it
)
