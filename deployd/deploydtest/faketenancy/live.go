package faketenancy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/monky/monky-deployd/deployd/tenancy"
)

// Caps the fake holds a live object to: the agent's own (deployd/tenancy's
// MaxLiveReason, MaxLiveServices, MaxLiveField), so that an agent that forgets them is
// refused here rather than in production.
const (
	maxLiveReason   = 512
	maxLiveServices = 256
	maxLiveField    = 128
)

// Live is the live object of a check-in (docs/PROTOCOL.md): the live release's health
// as the agent read it from docker. Either Healthy and Services are set (docker
// answered) or Reason is (it could not be asked).
type Live struct {
	// ObservedAt is when the agent asked docker.
	ObservedAt time.Time `json:"observed_at"`
	// Healthy is nil when Reason is set.
	Healthy *bool `json:"healthy,omitzero"`
	// Reason says why docker could not be asked; "" when it answered.
	Reason string `json:"reason,omitzero"`
	// Services is nil when Reason is set, and non-nil (perhaps empty) with Healthy.
	Services []LiveService `json:"services,omitzero"`
}

// LiveService is one service of a live object: the agent's own type (name, state,
// health, exit_code, restarts), which the fake fills field by field with its own code
// (parseLiveService), so that the check stays independent of the agent's.
type LiveService = tenancy.LiveService

// clone returns a deep copy of l, so that what the server stores is never shared.
func (l *Live) clone() *Live {
	if l == nil {
		return nil
	}
	c := *l
	if l.Healthy != nil {
		h := *l.Healthy
		c.Healthy = &h
	}
	if l.Services != nil {
		c.Services = slices.Clone(l.Services)
	}
	return &c
}

// fieldError is a malformed live object, naming the field.
type fieldError struct{ field, problem string }

// Error names the field and what is wrong with it.
func (e *fieldError) Error() string { return e.field + " " + e.problem }

// parseLive decodes a check-in's live object. It is strict about what it knows
// (kinds, healthy xor reason, named services, the caps) and ignores fields it does not
// know, as tenancy does, so that the agent can add fields. Absent or null is nil.
func parseLive(raw json.RawMessage) (*Live, error) {
	if len(raw) == 0 || isNull(raw) {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, &fieldError{"live", "must be an object"}
	}
	var l Live
	at, ok := obj["observed_at"]
	if !ok {
		return nil, &fieldError{"live.observed_at", "is required"}
	}
	var s string
	if err := field(at, &s, "live.observed_at", "a string"); err != nil {
		return nil, err
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, &fieldError{"live.observed_at", "must be an RFC 3339 time"}
	}
	l.ObservedAt = t
	if v, ok := obj["healthy"]; ok {
		var h bool
		if err := field(v, &h, "live.healthy", "a boolean"); err != nil {
			return nil, err
		}
		l.Healthy = &h
	}
	if v, ok := obj["reason"]; ok {
		if err := field(v, &l.Reason, "live.reason", "a string"); err != nil {
			return nil, err
		}
		if l.Reason == "" {
			return nil, &fieldError{"live.reason", "must not be empty when present"}
		}
		if len(l.Reason) > maxLiveReason {
			return nil, &fieldError{"live.reason", fmt.Sprintf("must be at most %d bytes", maxLiveReason)}
		}
	}
	if v, ok := obj["services"]; ok {
		var items []json.RawMessage
		if err := field(v, &items, "live.services", "an array"); err != nil {
			return nil, err
		}
		if len(items) > maxLiveServices {
			return nil, &fieldError{"live.services", fmt.Sprintf("must hold at most %d services", maxLiveServices)}
		}
		l.Services = make([]LiveService, 0, len(items))
		for i, item := range items {
			sv, err := parseLiveService(item, fmt.Sprintf("live.services[%d]", i))
			if err != nil {
				return nil, err
			}
			l.Services = append(l.Services, sv)
		}
	}
	switch {
	case l.Healthy != nil && l.Reason != "":
		return nil, &fieldError{"live.healthy", "and live.reason are exclusive"}
	case l.Services != nil && l.Reason != "":
		return nil, &fieldError{"live.services", "and live.reason are exclusive"}
	case l.Healthy == nil && l.Reason == "":
		return nil, &fieldError{"live", "needs healthy (docker answered) or reason (it could not be asked)"}
	case l.Healthy != nil && l.Services == nil:
		return nil, &fieldError{"live.services", "is required with live.healthy"}
	}
	return &l, nil
}

// parseLiveService decodes one service of a live object; path names it in errors.
func parseLiveService(raw json.RawMessage, path string) (LiveService, error) {
	var obj map[string]json.RawMessage
	if isNull(raw) || json.Unmarshal(raw, &obj) != nil {
		return LiveService{}, &fieldError{path, "must be an object"}
	}
	var sv LiveService
	strs := []struct {
		name string
		dst  *string
	}{{"name", &sv.Name}, {"state", &sv.State}, {"health", &sv.Health}}
	for _, f := range strs {
		if v, ok := obj[f.name]; ok {
			if err := field(v, f.dst, path+"."+f.name, "a string"); err != nil {
				return LiveService{}, err
			}
			if len(*f.dst) > maxLiveField {
				return LiveService{}, &fieldError{path + "." + f.name, fmt.Sprintf("must be at most %d bytes", maxLiveField)}
			}
		}
	}
	if sv.Name == "" {
		return LiveService{}, &fieldError{path + ".name", "is required"}
	}
	ints := []struct {
		name string
		dst  *int
	}{{"exit_code", &sv.ExitCode}, {"restarts", &sv.Restarts}}
	for _, f := range ints {
		if v, ok := obj[f.name]; ok {
			if err := field(v, f.dst, path+"."+f.name, "an integer"); err != nil {
				return LiveService{}, err
			}
		}
	}
	if sv.Restarts < 0 {
		return LiveService{}, &fieldError{path + ".restarts", "must not be negative"}
	}
	return sv, nil
}

// field decodes one present field into dst; null or another kind is an error naming
// the field and the kind it must be.
func field(raw json.RawMessage, dst any, name, kind string) error {
	if isNull(raw) || json.Unmarshal(raw, dst) != nil {
		return &fieldError{name, "must be " + kind}
	}
	return nil
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }
