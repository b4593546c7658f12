package compose

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Inspected is what docker inspect says about one container that the health
// evidence of a report needs.
type Inspected struct {
	// ID is the full container ID.
	ID string
	// Name is the container name, without docker's leading slash.
	Name string
	// Service is the compose service (the com.docker.compose.service label).
	Service string
	// State is docker's container state (running, exited, restarting, …).
	State string
	// ExitCode is the exit code of the container's last run.
	ExitCode int
	// RestartCount is how often docker restarted the container.
	RestartCount int
	// Health is "", starting, healthy or unhealthy.
	Health string
	// FailingStreak is how many healthchecks failed in a row.
	FailingStreak int
	// HealthLog holds the last healthchecks docker kept (at most five), oldest first.
	HealthLog []HealthCheck
}

// HealthCheck is one run of a container's healthcheck.
type HealthCheck struct {
	// Start and End bound the run.
	Start, End time.Time
	// ExitCode is the healthcheck's exit code: 0 healthy, 1 unhealthy, -1 when docker
	// could not run it at all.
	ExitCode int
	// Output is what the healthcheck printed (docker keeps at most 4 KiB).
	Output string
}

// inspectEntry is the part of docker inspect's container JSON that Inspected keeps.
type inspectEntry struct {
	ID     string `json:"Id"`
	Name   string `json:"Name"`
	Config struct {
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
	State struct {
		Status   string `json:"Status"`
		ExitCode int    `json:"ExitCode"`
		Health   *struct {
			Status        string `json:"Status"`
			FailingStreak int    `json:"FailingStreak"`
			Log           []struct {
				Start    time.Time `json:"Start"`
				End      time.Time `json:"End"`
				ExitCode int       `json:"ExitCode"`
				Output   string    `json:"Output"`
			} `json:"Log"`
		} `json:"Health"`
	} `json:"State"`
	RestartCount int `json:"RestartCount"`
}

// ParseInspect parses the JSON array docker inspect prints for containers.
func ParseInspect(data []byte) ([]Inspected, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, nil
	}
	var entries []inspectEntry
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("docker inspect printed no JSON array of containers: %w", err)
	}
	out := make([]Inspected, 0, len(entries))
	for _, e := range entries {
		if e.ID == "" {
			return nil, fmt.Errorf("docker inspect printed a container without an Id")
		}
		in := Inspected{
			ID:           e.ID,
			Name:         strings.TrimPrefix(e.Name, "/"),
			Service:      e.Config.Labels[ServiceLabel],
			State:        e.State.Status,
			ExitCode:     e.State.ExitCode,
			RestartCount: e.RestartCount,
		}
		if h := e.State.Health; h != nil {
			in.Health, in.FailingStreak = h.Status, h.FailingStreak
			for _, l := range h.Log {
				in.HealthLog = append(in.HealthLog, HealthCheck{Start: l.Start, End: l.End, ExitCode: l.ExitCode, Output: l.Output})
			}
		}
		out = append(out, in)
	}
	return out, nil
}

// Inspect runs docker inspect --type container for the given container IDs or names.
// Failure matches ErrCommandFailed; so does output that stayed open after docker
// exited (Output.Lingered), which may be cut.
func (c *Client) Inspect(ctx context.Context, ids []string) ([]Inspected, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	for _, id := range ids {
		if id == "" || strings.HasPrefix(id, "-") {
			return nil, &Error{Op: "inspect", Kind: ErrCommandFailed, ExitCode: -1,
				Detail: fmt.Sprintf("container %q is not a container ID or name", id)}
		}
	}
	stdout := &capBuffer{max: maxPSOutput}
	stderr := newTailBuffer(c.limit)
	res := c.run(ctx, append([]string{"inspect", "--type", "container"}, ids...), stdout, stderr)
	if stdout.overflow {
		return nil, &Error{Op: "inspect", Kind: ErrCommandFailed, ExitCode: res.code,
			Detail: fmt.Sprintf("inspect printed more than %d bytes", maxPSOutput)}
	}
	if res.err != nil {
		tail, _ := stderr.snapshot()
		return nil, &Error{Op: "inspect", Kind: ErrCommandFailed, ExitCode: res.code, Err: res.err,
			Detail: strings.TrimSpace(string(tail))}
	}
	if res.lingered {
		return nil, cutOutput("inspect", res)
	}
	return ParseInspect(stdout.buf)
}

// Evidence limits: how many healthchecks and log lines of each failing service a
// report's tail shows.
const (
	evidenceChecks   = 3
	evidenceLogLines = 50
	evidenceOutput   = 512
)

// HealthEvidence describes, for each of services, why it is not healthy: its
// containers' state and exit code, the last healthcheck runs with their exit codes
// and output, then the service's logs. It is what a failed report's tail carries after
// compose's own output. What cannot be read is said in the text, never an error: the
// evidence is best effort, the failure it explains is already known.
func (c *Client) HealthEvidence(ctx context.Context, services []string) string {
	if len(services) == 0 {
		return ""
	}
	var b strings.Builder
	byService := map[string][]Inspected{}
	cs, err := c.containers(ctx)
	if err != nil {
		fmt.Fprintf(&b, "--- health checks: reading the containers failed: %v ---\n", err)
	} else {
		var ids []string
		for _, ctr := range cs {
			if slices.Contains(services, ctr.Service) && ctr.ID != "" {
				ids = append(ids, ctr.ID)
			}
		}
		ins, err := c.inspect(ctx, ids)
		if err != nil {
			fmt.Fprintf(&b, "--- health checks: inspecting the containers failed: %v ---\n", err)
		}
		for _, in := range ins {
			byService[in.Service] = append(byService[in.Service], in)
		}
	}
	for _, s := range services {
		for _, in := range byService[s] {
			writeEvidence(&b, s, in)
		}
	}
	logs, err := c.Logs(ctx, services, evidenceLogLines)
	if err != nil {
		fmt.Fprintf(&b, "--- logs of %s: docker compose logs failed: %v ---\n", strings.Join(services, ", "), err)
	} else {
		fmt.Fprintf(&b, "--- logs of %s ---\n%s", strings.Join(services, ", "), logs)
	}
	return b.String()
}

// writeEvidence writes one container's state and its last healthchecks.
func writeEvidence(b *strings.Builder, service string, in Inspected) {
	fmt.Fprintf(b, "--- health of %s (container %s): %s", service, in.Name, in.State)
	if in.Health != "" {
		fmt.Fprintf(b, ", health %s", in.Health)
	}
	if in.State != "running" || in.ExitCode != 0 {
		fmt.Fprintf(b, ", exit code %d", in.ExitCode)
	}
	if in.RestartCount > 0 {
		fmt.Fprintf(b, ", restarted %d times", in.RestartCount)
	}
	b.WriteString(" ---\n")
	checks := in.HealthLog
	if len(checks) > evidenceChecks {
		checks = checks[len(checks)-evidenceChecks:]
	}
	for _, hc := range checks {
		out := strings.TrimSpace(hc.Output)
		if len(out) > evidenceOutput {
			out = out[:evidenceOutput] + " …"
		}
		fmt.Fprintf(b, "healthcheck at %s: exit code %d: %s\n", hc.End.UTC().Format(time.RFC3339), hc.ExitCode, out)
	}
}
