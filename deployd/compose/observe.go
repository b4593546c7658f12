package compose

import (
	"context"
	"slices"
	"time"
)

// Reader reads the state of a project's containers. A Client reads through the docker
// CLI (docker compose ps, docker inspect) unless Config.Reader names another, such as
// a client of the docker Engine API, which answers in milliseconds where the CLI
// starts a process.
type Reader interface {
	// Containers returns the containers of the compose project, stopped ones
	// included, as docker compose ps --all describes them.
	Containers(ctx context.Context, project string) ([]Container, error)
	// Inspect returns what docker inspect says of the given containers (IDs or names).
	Inspect(ctx context.Context, ids []string) ([]Inspected, error)
}

// Observation is the state of a project's services at one moment, as a check-in
// reports it between two applies.
type Observation struct {
	// At is when the containers were read.
	At time.Time
	// Healthy is true when every expected service is ready: running and healthy (or
	// running without a healthcheck), or a one-shot that exited 0.
	Healthy bool
	// Services holds every expected service, sorted by name.
	Services []ObservedService
}

// ObservedService is one service of an Observation. With several containers the
// least ready one speaks for the service; Restarts adds theirs up.
type ObservedService struct {
	// Name is the compose service name.
	Name string
	// State is docker's container state, or StateMissing without a container.
	State string
	// Health is "", starting, healthy or unhealthy.
	Health string
	// ExitCode is the exit code of an exited container, 0 otherwise.
	ExitCode int
	// Restarts is how often docker restarted the service's containers.
	Restarts int
	// Ready is the service's verdict (see Observation.Healthy).
	Ready bool
	// Containers are the IDs of the service's containers, sorted.
	Containers []string
	// InspectedAt is when Restarts was last read by inspecting the containers: this
	// observation's At, or an earlier one's that ObserveAfter carried the count from.
	InspectedAt time.Time
}

// maxCarry is how long ObserveAfter carries a restart count without inspecting: a
// count that a clock step hid is read again within it.
const maxCarry = time.Hour

// Observe reads the project's containers once and judges each of services (every
// service with a container when services is empty). Unlike WaitHealthy it does not
// wait: a service still starting is not ready. A container that exited 0 is ready only
// when its service is one of oneShots (the services that were seen done when the
// release came up); with oneShots nil (not known) it is ready whatever its service.
// With no service at all the observation is not healthy. Failure to read matches
// ErrCommandFailed, or is the Reader's error.
func (c *Client) Observe(ctx context.Context, services, oneShots []string) (Observation, error) {
	return c.ObserveAfter(ctx, Observation{}, services, oneShots)
}

// ObserveAfter is Observe knowing prev, an earlier observation of the same project
// by this host's clock (its At and InspectedAt as ObserveAfter set them): a service
// whose containers are the same as then and have all been running since before
// prev.At (docker's uptime says so) cannot have restarted since, so its restart count
// is prev's and its containers are not inspected — for at most an hour after they
// last were. Everything else is inspected as Observe does. The zero prev knows
// nothing.
func (c *Client) ObserveAfter(ctx context.Context, prev Observation, services, oneShots []string) (Observation, error) {
	at := time.Now()
	cs, err := c.containers(ctx)
	if err != nil {
		return Observation{}, err
	}
	restarts, inspectedAt, err := c.restarts(ctx, prev, cs, at, time.Now())
	if err != nil {
		return Observation{}, err
	}
	// A snapshot has no previous poll: every running container counts as settled.
	seen := map[string]sighting{}
	for _, ctr := range cs {
		seen[ctr.ID] = sighting{snapshot: true}
	}
	names := serviceNames(services, cs)
	obs := Observation{At: at, Healthy: len(names) > 0}
	for _, name := range names {
		s := ObservedService{Name: name, State: StateMissing, Restarts: restarts[name], Containers: containerIDs(cs, name),
			InspectedAt: inspectedAt[name]}
		worst := -1 // badness of the container speaking for the service; -1: none yet
		for _, ctr := range cs {
			if ctr.Service != name {
				continue
			}
			v, _ := judge(ctr, seen)
			if v == ready && ctr.State == "exited" && oneShots != nil && !slices.Contains(oneShots, name) {
				v = notReady // a service that stopped, not a one-shot that is done
			}
			if badness(v) > worst {
				worst = badness(v)
				s.State, s.Health, s.ExitCode, s.Ready = ctr.State, ctr.Health, 0, v == ready
				if ctr.State == "exited" || ctr.State == "dead" {
					s.ExitCode = ctr.ExitCode
				}
			}
		}
		obs.Healthy = obs.Healthy && s.Ready
		obs.Services = append(obs.Services, s)
	}
	return obs, nil
}

// restarts is the restart count of each service of cs, listed between at and listed,
// and when it was read: prev's for a service unchanged since prev (unchangedSince),
// docker inspect's, at, for the others.
func (c *Client) restarts(ctx context.Context, prev Observation, cs []Container, at, listed time.Time) (map[string]int, map[string]time.Time, error) {
	restarts, inspectedAt := map[string]int{}, map[string]time.Time{}
	known := map[string]ObservedService{}
	for _, s := range prev.Services {
		known[s.Name] = s
	}
	var ids []string
	for _, name := range serviceNames(nil, cs) {
		if p, ok := known[name]; ok && unchangedSince(prev.At, listed, p, cs) {
			restarts[name], inspectedAt[name] = p.Restarts, p.InspectedAt
			continue
		}
		inspectedAt[name] = at
		ids = append(ids, containerIDs(cs, name)...)
	}
	ins, err := c.inspect(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	for _, in := range ins {
		restarts[in.Service] += max(in.RestartCount, 0)
	}
	return restarts, inspectedAt, nil
}

// unchangedSince reports whether the containers of service p in cs, listed no later
// than listed, are those p saw at since and have all been running since before it:
// docker's uptime is at least minUptime, so each started no later than listed minus
// that, and a restart would have started it again. A since that is not before listed
// (a clock that went back) and a count inspected more than maxCarry ago say no.
func unchangedSince(since, listed time.Time, p ObservedService, cs []Container) bool {
	if since.IsZero() || !since.Before(listed) || p.InspectedAt.IsZero() || listed.Sub(p.InspectedAt) >= maxCarry ||
		len(p.Containers) == 0 || !slices.Equal(containerIDs(cs, p.Name), p.Containers) {
		return false
	}
	for _, ctr := range cs {
		if ctr.Service != p.Name {
			continue
		}
		up, ok := minUptime(ctr.Status)
		if ctr.State != "running" || !ok || !listed.Add(-up).Before(since) {
			return false
		}
	}
	return true
}

// containerIDs are the IDs of service's containers in cs, sorted.
func containerIDs(cs []Container, service string) []string {
	var ids []string
	for _, ctr := range cs {
		if ctr.Service == service {
			ids = append(ids, ctr.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// serviceNames is expected, or the services of cs when expected is empty: sorted,
// without repeats.
func serviceNames(expected []string, cs []Container) []string {
	names := slices.Clone(expected)
	if len(names) == 0 {
		for _, ctr := range cs {
			names = append(names, ctr.Service)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// OneOffLabel marks the containers of `docker compose run`: they are not a service's
// containers, and a leftover one that exited says nothing of the service.
const OneOffLabel = "com.docker.compose.oneoff"

// containers reads the project's containers through the Reader, or docker compose ps,
// without the one-off containers of `docker compose run`.
func (c *Client) containers(ctx context.Context) ([]Container, error) {
	var cs []Container
	var err error
	if c.reader != nil {
		cs, err = c.reader.Containers(ctx, c.project)
	} else {
		cs, err = c.PS(ctx)
	}
	return slices.DeleteFunc(cs, func(ctr Container) bool { return ctr.Labels[OneOffLabel] == "True" }), err
}

// inspect inspects containers through the Reader, or docker inspect.
func (c *Client) inspect(ctx context.Context, ids []string) ([]Inspected, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if c.reader != nil {
		return c.reader.Inspect(ctx, ids)
	}
	return c.Inspect(ctx, ids)
}

// badness orders verdicts from ready to failed.
func badness(v verdict) int {
	switch v {
	case ready:
		return 0
	case notReady:
		return 1
	default:
		return 2
	}
}
