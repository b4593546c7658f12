package deployd

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

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
