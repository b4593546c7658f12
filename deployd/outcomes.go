package deployd

import (
	"fmt"
	"time"

	"github.com/monky/monky-deployd/internal/release"
)

// Results of a Restore: what became of the box after an apply failed after promote.
const (
	// RestoreHealthy: the previous release is live again and every service is ready.
	RestoreHealthy = "restored-healthy"
	// RestoreUnhealthy: the previous release is live again but did not become healthy
	// within health_timeout; the box is degraded.
	RestoreUnhealthy = "restored-unhealthy"
	// RestoreFailed: the previous release could not be brought back (current could not
	// be swapped, or its compose up failed); the box is degraded.
	RestoreFailed = "restore-failed"
	// RestoreNone: there was no previous release; the failed one was taken down.
	RestoreNone = "none"
)

// Restore is what became of the box after an apply failed after promote.
type Restore struct {
	// Result is RestoreHealthy, RestoreUnhealthy, RestoreFailed or RestoreNone.
	Result string `json:"result"`
	// SHA is the restored release, "" with RestoreNone.
	SHA string `json:"sha,omitempty"`
	// Detail says why a restore is not healthy; it names services, never a value.
	Detail string `json:"detail,omitempty"`
	// At is when the restore ended.
	At time.Time `json:"at,omitzero"`
}

// Degraded reports whether the box was left degraded: the restored release is not
// healthy, or nothing could be restored.
func (r Restore) Degraded() bool {
	return r.Result == RestoreUnhealthy || r.Result == RestoreFailed
}

// String is the restore as the report's detail ends with it, e.g.
// "restore: restored-healthy 1f2e3d4c5b6a".
func (r Restore) String() string {
	s := "restore: " + r.Result
	if r.SHA != "" {
		s += " " + release.Short(r.SHA)
	}
	if r.Detail != "" {
		s += " (" + r.Detail + ")"
	}
	return s
}

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

// mib is a byte count for a person ("12.5 MiB").
func mib(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
