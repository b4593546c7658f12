package deployd

import (
	"time"
)

// StatusOffline is a box whose check-ins do not reach tenancy (a laptop off the
// network): the live release keeps running untouched, and the first check-in that is
// answered converges the box without a console action.
type StatusOffline struct {
	// LastReached is when tenancy last answered a check-in; null: never.
	LastReached *time.Time `json:"last_reached"`
	// FailingSince is when the first of the check-ins in a row that did not reach it
	// failed.
	FailingSince time.Time `json:"failing_since"`
}

// noteUnreached records in st that a check-in did not reach tenancy at now, when err
// is temporary (offline, 5xx, a timeout): the first such check-in of a row starts
// Unreached.
func noteUnreached(st *State, err error, now time.Time) {
	if IsTemporary(err) && st.Unreached.IsZero() {
		st.Unreached = now
	}
}

// offlineOf is what status says of st's unanswered check-ins; nil while they are
// answered.
func offlineOf(st State) *StatusOffline {
	if st.Unreached.IsZero() {
		return nil
	}
	return &StatusOffline{LastReached: timeOrNil(st.LastCheckin), FailingSince: st.Unreached.UTC()}
}

// offlineLine is status's tenancy line.
func offlineLine(o StatusOffline) string {
	since := "never reached"
	if o.LastReached != nil {
		since = "not reached since " + o.LastReached.Format(time.RFC3339)
	}
	return since + " (check-ins failing since " + o.FailingSince.Format(time.RFC3339) + "); the live release keeps running untouched, and the first check-in answered converges the box"
}

// offlineHeadline is what the headline adds for an offline box: "" when it is not.
func offlineHeadline(o *StatusOffline) string {
	switch {
	case o == nil:
		return ""
	case o.LastReached == nil:
		return "; tenancy never reached"
	default:
		return "; tenancy not reached since " + o.LastReached.Format(time.RFC3339)
	}
}
