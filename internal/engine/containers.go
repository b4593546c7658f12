package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/monky/monky-deployd/deployd/compose"
)

// ProjectLabel is the container label that names a container's compose project.
const ProjectLabel = "com.docker.compose.project"

var _ compose.Reader = (*Client)(nil)

// summary is the part of the Engine API's ContainerSummary (GET /containers/json)
// that Containers and ImagesInUse read.
type summary struct {
	ID      string            `json:"Id"`
	Names   []string          `json:"Names"`
	Image   string            `json:"Image"`
	ImageID string            `json:"ImageID"`
	Command string            `json:"Command"`
	Labels  map[string]string `json:"Labels"`
	State   string            `json:"State"`
	Status  string            `json:"Status"`
	Ports   []struct {
		IP          string `json:"IP"`
		PrivatePort int    `json:"PrivatePort"`
		PublicPort  int    `json:"PublicPort"`
		Type        string `json:"Type"`
	} `json:"Ports"`
	// Health is sent by API 1.52 and later ("none" without a healthcheck or when
	// the container is not running).
	Health *struct {
		Status string `json:"Status"`
	} `json:"Health"`
}

// Containers returns the containers of the compose project, stopped ones included,
// as `docker compose ps --all` describes them (GET /containers/json?all=1 with the
// project's label as filter). The project name is lowercased, as compose does.
func (c *Client) Containers(ctx context.Context, project string) ([]compose.Container, error) {
	const op = "containers"
	body, err := c.projectList(ctx, op, project)
	if err != nil {
		return nil, err
	}
	cs, err := decodeContainers(body)
	if err != nil {
		return nil, &Error{Op: op, Host: c.host, Path: "/containers/json", Err: err}
	}
	return cs, nil
}

// projectList is GET /containers/json?all=1 filtered by the project's label.
func (c *Client) projectList(ctx context.Context, op, project string) ([]byte, error) {
	const path = "/containers/json"
	if project == "" {
		return nil, &Error{Op: op, Host: c.host, Path: path, Err: errors.New("no project name")}
	}
	filter, err := json.Marshal(map[string]map[string]bool{
		"label": {ProjectLabel + "=" + strings.ToLower(project): true},
	})
	if err != nil {
		return nil, &Error{Op: op, Host: c.host, Path: path, Err: err}
	}
	return c.do(ctx, op, http.MethodGet, path, url.Values{"all": {"1"}, "filters": {string(filter)}})
}

// decodeContainers decodes a GET /containers/json answer and maps it as compose ps
// does; nil when it is empty.
func decodeContainers(body []byte) ([]compose.Container, error) {
	var list []summary
	if err := jsonUnmarshal(body, &list); err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, nil
	}
	out := make([]compose.Container, 0, len(list))
	for _, s := range list {
		out = append(out, s.container())
	}
	return out, nil
}

// container maps one summary as compose ps does (compose's pkg/compose/ps.go): the
// canonical name, the project and service from the labels, health only of a running
// container, an exit code only of an exited one, ports sorted by the container's port.
func (s summary) container() compose.Container {
	c := compose.Container{
		ID: s.ID, Name: canonicalName(s.ID, s.Names), Image: s.Image, Command: s.Command,
		Project: s.Labels[ProjectLabel], Service: s.Labels[compose.ServiceLabel],
		State: strings.ToLower(s.State), Status: s.Status, Labels: s.Labels,
	}
	switch c.State {
	case "running":
		if s.Health != nil {
			c.Health = healthWord(s.Health.Status)
		} else {
			c.Health = healthFromStatus(s.Status)
		}
	case "exited":
		c.ExitCode = compose.ExitCodeFromStatus(s.Status)
	}
	for _, p := range s.Ports {
		c.Publishers = append(c.Publishers, compose.Publisher{
			URL: p.IP, TargetPort: p.PrivatePort, PublishedPort: p.PublicPort, Protocol: p.Type,
		})
	}
	slices.SortStableFunc(c.Publishers, func(a, b compose.Publisher) int {
		return cmp.Compare(a.TargetPort, b.TargetPort)
	})
	return c
}

// canonicalName is the container's own name: the first of names with a single leading
// slash (the others are link aliases such as "/web/db"), else the first name, else
// the short ID, as compose names it.
func canonicalName(id string, names []string) string {
	for _, n := range names {
		if strings.LastIndex(n, "/") == 0 {
			return n[1:]
		}
	}
	if len(names) > 0 {
		return strings.TrimPrefix(names[0], "/")
	}
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// healthWord is a health status as compose prints it: starting, healthy or unhealthy;
// "" for "none" and anything unknown.
func healthWord(s string) string {
	switch s = strings.ToLower(s); s {
	case "starting", "healthy", "unhealthy":
		return s
	}
	return ""
}

// healthFromStatus reads the health from docker's status text of a running container:
// "Up 3 minutes (healthy)", "(unhealthy)" or "(health: starting)"; "" otherwise.
func healthFromStatus(status string) string {
	switch {
	case strings.HasSuffix(status, " (healthy)"):
		return "healthy"
	case strings.HasSuffix(status, " (unhealthy)"):
		return "unhealthy"
	case strings.HasSuffix(status, " (health: starting)"):
		return "starting"
	}
	return ""
}

// inspectParallel bounds how many inspections run at once: a release's containers are
// inspected together, so that the live health of a check-in costs about one round
// trip more than the list, not one per container.
const inspectParallel = 4

// Inspect returns what docker inspect says of the given containers (IDs or names), in
// their order (GET /containers/{id}/json each, up to inspectParallel at once). A
// container that went away since it was listed (404) is left out, without an error.
func (c *Client) Inspect(ctx context.Context, ids []string) ([]compose.Inspected, error) {
	const op = "inspect"
	for _, id := range ids {
		if id == "" || strings.ContainsAny(id, "/?#") {
			return nil, &Error{Op: op, Host: c.host, Path: "/containers/{id}/json", Err: errors.New("an empty container ID or one with / ? #")}
		}
	}
	type result struct {
		in   compose.Inspected
		gone bool
		err  error
	}
	results := make([]result, len(ids))
	sem := make(chan struct{}, inspectParallel)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			in, gone, err := c.inspectOne(ctx, op, id)
			results[i] = result{in: in, gone: gone, err: err}
		}()
	}
	wg.Wait()
	var out []compose.Inspected
	for _, r := range results {
		switch {
		case r.err != nil:
			return nil, r.err
		case !r.gone:
			out = append(out, r.in)
		}
	}
	return out, nil
}

// inspectOne is GET /containers/{id}/json; gone when the container went away (404).
func (c *Client) inspectOne(ctx context.Context, op, id string) (compose.Inspected, bool, error) {
	path := "/containers/" + url.PathEscape(id) + "/json"
	body, err := c.do(ctx, op, http.MethodGet, path, nil)
	if errors.Is(err, ErrNotFound) {
		c.log.DebugContext(ctx, "docker engine: container went away before inspect", "container", id)
		return compose.Inspected{}, true, nil
	}
	if err != nil {
		return compose.Inspected{}, false, err
	}
	in, err := decodeInspect(body)
	if err != nil {
		return compose.Inspected{}, false, &Error{Op: op, Host: c.host, Path: path, Err: err}
	}
	return in, false, nil
}

// decodeInspect decodes one GET /containers/{id}/json answer, the object docker
// inspect prints, with compose.ParseInspect.
func decodeInspect(body []byte) (compose.Inspected, error) {
	var probe struct {
		ID string `json:"Id"`
	}
	if err := jsonUnmarshal(body, &probe); err != nil {
		return compose.Inspected{}, err
	}
	if probe.ID == "" {
		return compose.Inspected{}, errors.New("the answer is a container without an Id")
	}
	wrapped := make([]byte, 0, len(body)+2)
	wrapped = append(append(append(wrapped, '['), body...), ']')
	ins, err := compose.ParseInspect(wrapped)
	if err != nil {
		return compose.Inspected{}, jsonErr(err)
	}
	if len(ins) != 1 {
		return compose.Inspected{}, errors.New("the answer is not one container")
	}
	return ins[0], nil
}
