package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakestack"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// faultSet is everything the fakes are told to do wrong at one moment.
type faultSet struct {
	tenancy faketenancy.Faults
	sealed  bool
	docker  fakedocker.Script
}

func (f *faultSet) status(call string, code int) { set(&f.tenancy.Status, call, code) }

func (f *faultSet) delay(call string, d time.Duration) { set(&f.tenancy.Delay, call, d) }

func (f *faultSet) command(name string, c fakedocker.Command) { set(&f.docker.Commands, name, c) }

// set sets m[k] to v, making the map first when it is nil.
func set[V any](m *map[string]V, k string, v V) {
	if *m == nil {
		*m = map[string]V{}
	}
	(*m)[k] = v
}

// episode kinds: a fault that lasts a while. The delays are longer than the boxes'
// tenancy.timeout (2s), so a held call is a time-out.
var episodes = []struct {
	name   string
	weight int
	apply  func(*faultSet)
}{
	{"tenancy checkin 503", 4, func(f *faultSet) { f.status("checkin", 503) }},
	{"tenancy checkin 500", 2, func(f *faultSet) { f.status("checkin", 500) }},
	{"tenancy checkin 429", 1, func(f *faultSet) { f.status("checkin", 429); f.tenancy.RetryAfter = 2 * time.Second }},
	{"tenancy checkin 401", 1, func(f *faultSet) { f.status("checkin", 401) }},
	{"tenancy checkin time-out", 3, func(f *faultSet) { f.delay("checkin", 5*time.Second) }},
	{"tenancy bundle 503", 2, func(f *faultSet) { f.status("bundle", 503) }},
	{"tenancy bundle time-out", 1, func(f *faultSet) { f.delay("bundle", 5*time.Second) }},
	{"tenancy bundle truncated", 1, func(f *faultSet) { f.tenancy.TruncateBundle = true }},
	{"tenancy lease 503", 2, func(f *faultSet) { f.status("lease", 503) }},
	{"tenancy lease time-out", 1, func(f *faultSet) { f.delay("lease", 5*time.Second) }},
	{"tenancy report 503", 2, func(f *faultSet) { f.status("report", 503) }},
	{"OpenBao sealed", 3, func(f *faultSet) { f.sealed = true }},
	{"docker up fails", 2, func(f *faultSet) {
		f.command("up", fakedocker.Command{Exit: 1, Stderr: "Error response from daemon: pull access denied (injected by the soak)\n"})
	}},
	{"docker up slow", 1, func(f *faultSet) { f.command("up", fakedocker.Command{Delay: 4 * time.Second}) }},
	{"docker ps fails", 2, func(f *faultSet) {
		f.command("ps", fakedocker.Command{Exit: 1, Stderr: "Cannot connect to the Docker daemon (injected by the soak)\n"})
	}},
	{"docker ps slow", 1, func(f *faultSet) { f.command("ps", fakedocker.Command{Delay: 3 * time.Second}) }},
	{"docker web unhealthy", 2, func(f *faultSet) {
		set(&f.docker.Services, "web", fakedocker.Service{States: []fakedocker.State{{Health: "starting"}, {Health: "unhealthy", HealthOutput: "injected by the soak"}}})
	}},
}

// events happen at once: bundle churn and secret rotation.
var events = []struct {
	name   string
	weight int
	do     func(*world) error
}{
	{"publish a good bundle", 6, func(w *world) error { return w.publish(true) }},
	{"publish a refused bundle", 2, func(w *world) error { return w.publish(false) }},
	{"rotate the secret canary", 2, func(w *world) error { w.rotate(); return nil }},
}

// world is the fakes and the boxes the faults act on, and what was done to them.
type world struct {
	stack *fakestack.Stack
	boxes []*box
	seed  uint64

	mu       sync.Mutex
	serial   map[string]int64
	good     map[string]bool // sha → published as a good bundle
	refused  map[string]bool // sha → published to be refused
	canaries []string
	counts   map[string]int // faults and events by name
	lastGood map[string]string
}

func newWorld(s *fakestack.Stack, boxes []*box, seed uint64) *world {
	return &world{stack: s, boxes: boxes, seed: seed, serial: map[string]int64{}, good: map[string]bool{},
		refused: map[string]bool{}, counts: map[string]int{}, lastGood: map[string]string{}}
}

func (w *world) count(name string) {
	w.mu.Lock()
	w.counts[name]++
	w.mu.Unlock()
}

// rotate writes a new canary as every environment's db password. Each canary must
// appear only in the releases' .env files.
func (w *world) rotate() {
	w.mu.Lock()
	// letters, digits, dashes and spaces only: JSON, slog's quoting and the .env's
	// quoting leave it as it is, so a leak anywhere is found by a plain search
	c := fmt.Sprintf("soak-canary-%x-%03d-Zq9 with spaces", w.seed, len(w.canaries))
	w.canaries = append(w.canaries, c)
	w.mu.Unlock()
	for _, b := range w.boxes {
		w.stack.Bao.PutSecret(b.Env, "db", map[string]string{"password": c})
	}
}

func (w *world) canaryList() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.canaries...)
}

// publish publishes the next serial of the sample application to every environment:
// as it is (good), or with a privileged service or an unresolved variable (refused
// before any lease).
func (w *world) publish(good bool) error {
	for i, b := range w.boxes {
		w.mu.Lock()
		w.serial[b.Env]++
		serial := w.serial[b.Env]
		w.mu.Unlock()
		spec := faketenancy.SampleApp(b.Env, serial)
		if !good {
			c := spec.Files["compose.yaml"]
			if (int(serial)+i)%2 == 0 {
				c = strings.Replace(c, "  web:\n", "  web:\n    privileged: true\n", 1)
			} else {
				c = strings.Replace(c, "LOG_LEVEL: ${LOG_LEVEL}", "LOG_LEVEL: ${NOT_IN_THE_MANIFEST}", 1)
			}
			spec.Files["compose.yaml"] = c
		}
		bn, err := faketenancy.BuildBundle(spec)
		if err != nil {
			return err
		}
		sha, _, err := w.stack.Tenancy.PublishBundle(b.Env, bn.Data)
		if err != nil {
			return err
		}
		w.mu.Lock()
		if good {
			w.good[sha] = true
			w.lastGood[b.Env] = sha
		} else {
			w.refused[sha] = true
		}
		w.mu.Unlock()
	}
	return nil
}

// apply tells the fakes and every box's docker what set says.
func (w *world) apply(set *faultSet) error {
	w.stack.Tenancy.SetFaults(set.tenancy)
	w.stack.Bao.SetSealed(set.sealed)
	for _, b := range w.boxes {
		// atomic: a docker call running meanwhile reads the old script or the new one
		if err := b.Docker.SetScript(&set.docker); err != nil {
			return err
		}
	}
	return nil
}

// rain injects faults until ctx ends: episodes and events arrive at exponential
// intervals of mean every; an episode lasts 1–10 s, several may overlap (the later
// one wins on the same call). When ctx ends every fault is cleared.
func (w *world) rain(ctx context.Context, rng *rand.Rand, every time.Duration, fail func(string, ...any)) {
	type active struct {
		apply func(*faultSet)
		until time.Time
	}
	var live []active
	totalEp, totalEv := 0, 0
	for _, e := range episodes {
		totalEp += e.weight
	}
	for _, e := range events {
		totalEv += e.weight
	}
	next := time.Now().Add(time.Duration(rng.ExpFloat64() * float64(every)))
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	changed := false
	for {
		select {
		case <-ctx.Done():
			if err := w.apply(&faultSet{}); err != nil {
				fail("clear the faults: %v", err)
			}
			return
		case <-tick.C:
		}
		now := time.Now()
		kept := live[:0]
		for _, a := range live {
			if now.Before(a.until) {
				kept = append(kept, a)
			} else {
				changed = true
			}
		}
		live = kept
		for !now.Before(next) {
			next = next.Add(time.Duration(rng.ExpFloat64() * float64(every)))
			// two in three arrivals are episodes, one in three an event
			if rng.IntN(3) < 2 {
				pick := rng.IntN(totalEp)
				for _, e := range episodes {
					if pick < e.weight {
						live = append(live, active{apply: e.apply, until: now.Add(time.Second + time.Duration(rng.Int64N(int64(9*time.Second))))})
						w.count(e.name)
						changed = true
						break
					}
					pick -= e.weight
				}
				continue
			}
			pick := rng.IntN(totalEv)
			for _, e := range events {
				if pick < e.weight {
					if err := e.do(w); err != nil {
						fail("%s: %v", e.name, err)
					}
					w.count(e.name)
					break
				}
				pick -= e.weight
			}
		}
		if changed {
			set := &faultSet{}
			for _, a := range live {
				a.apply(set)
			}
			if err := w.apply(set); err != nil {
				fail("apply faults: %v", err)
			}
			changed = false
		}
	}
}
