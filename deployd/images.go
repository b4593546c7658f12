package deployd

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Reclaim is what the image hygiene after an apply removed.
type Reclaim struct {
	// At is when it ran.
	At time.Time `json:"at"`
	// Images is how many images were removed.
	Images int `json:"images"`
	// Bytes adds up the removed images' sizes: an upper bound of the space freed, as
	// layers shared with images still kept stay on disk.
	Bytes int64 `json:"bytes"`
	// Failed is how many removals docker refused or failed; they are tried again
	// after the next apply.
	Failed int `json:"failed,omitempty"`
}

// String is the summary a report's detail and the log carry.
func (r Reclaim) String() string {
	s := fmt.Sprintf("removed %d images only pruned releases used (up to %s)", r.Images, mib(r.Bytes))
	if r.Failed > 0 {
		s += fmt.Sprintf(", %d could not be removed", r.Failed)
	}
	return s
}

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

// reclaimImages removes, by ID, the images that only releases no longer staged (the
// ones Prune just removed, or gone otherwise) named, and that no container uses. It
// never removes an image the agent's releases did not name, never forces, and never
// prunes: what docker refuses stays, and is tried again after the next apply.
func (t *tick) reclaimImages(ctx context.Context) *Reclaim {
	gone := func(sha string) bool { return !t.a.store.Has(sha) }
	o, err := t.a.orphanImages(ctx, t.st, gone)
	if err != nil {
		t.log.Warn("image hygiene skipped: could not ask docker which images are in use; the next apply tries again", "err", err)
		return nil
	}
	if len(o.held) > 0 {
		t.log.Info("image hygiene kept images of pruned releases that a container outside the live release still uses; the next apply tries again",
			"images", strings.Join(o.held, " "))
	}
	var r *Reclaim
	if len(o.ids) > 0 {
		r = &Reclaim{At: t.a.now()}
		for _, id := range o.ids {
			if err := t.a.engine.RemoveImage(ctx, id); err != nil {
				r.Failed++
				t.log.Warn("could not remove an image only pruned releases used; the next apply tries again", "image", id, "err", err)
				continue
			}
			r.Images++
			r.Bytes += o.sizes[id]
		}
		t.log.Info("image hygiene: "+r.String(), "images", r.Images, "bytes", r.Bytes)
	}
	if len(o.held) == 0 && (r == nil || r.Failed == 0) {
		t.forgetImages(gone)
	}
	return r
}

// forgetImages drops the image records of the releases drop names.
func (t *tick) forgetImages(drop func(sha string) bool) {
	maps.DeleteFunc(t.st.Images, func(sha string, _ []string) bool { return drop(sha) })
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

// mib is a byte count for a person.
func mib(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
