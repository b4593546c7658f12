package compose

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/monky/monky-deployd/internal/jsonerr"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// ServiceLabel is the container label that names a container's compose service.
const ServiceLabel = "com.docker.compose.service"

// Container is one container as docker compose ps --format json describes it. The
// fields common to both shapes of that output are kept; the rest is ignored.
type Container struct {
	// ID is the container ID (12 characters in compose 2.21 and later, full before).
	ID string
	// Name is the container name, e.g. "monky-web-1".
	Name string
	// Image is the image reference.
	Image string
	// Command is the container's command, unquoted.
	Command string
	// Project is the compose project name.
	Project string
	// Service is the compose service name.
	Service string
	// State is docker's container state: created, running, paused, restarting,
	// removing, exited or dead.
	State string
	// Health is "", starting, healthy or unhealthy; docker sets it only for running
	// containers with a healthcheck.
	Health string
	// Status is docker's status text, e.g. "Up 3 minutes (healthy)".
	Status string
	// ExitCode is the exit code of an exited container.
	ExitCode int
	// Publishers are the published ports.
	Publishers []Publisher
	// Labels are the container labels. Compose 2.21 and later print them as one
	// "k=v,k=v" string; a label value holding a comma is cut there.
	Labels map[string]string
}

// Publisher is one published port of a container.
type Publisher struct {
	// URL is the host address the port is published on ("0.0.0.0", "::", or "").
	URL string
	// TargetPort is the port inside the container.
	TargetPort int
	// PublishedPort is the port on the host, 0 when not published.
	PublishedPort int
	// Protocol is "tcp" or "udp".
	Protocol string
}

// psEntry is the union of both ps shapes: compose ≤2.20 marshals its
// api.ContainerSummary (Labels a map, Names absent), compose ≥2.21 marshals docker's
// container formatter (Labels, Names, Mounts, Networks, LocalVolumes and Size strings,
// Command quoted).
type psEntry struct {
	ID         string          `json:"ID"`
	Name       string          `json:"Name"`
	Names      json.RawMessage `json:"Names"`
	Image      string          `json:"Image"`
	Command    string          `json:"Command"`
	Project    string          `json:"Project"`
	Service    string          `json:"Service"`
	State      string          `json:"State"`
	Health     string          `json:"Health"`
	Status     string          `json:"Status"`
	ExitCode   int             `json:"ExitCode"`
	Publishers []Publisher     `json:"Publishers"`
	Labels     json.RawMessage `json:"Labels"`
}

// ParsePS reads the output of docker compose ps --format json in both shapes: one JSON
// array (compose 2.20 and earlier) or one object per line (2.21 and later); empty
// output, "[]" and "null" are no containers. Errors say where the output broke, not
// what it held.
func ParsePS(data []byte) ([]Container, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, nil
	}
	var entries []psEntry
	if data[0] == '[' {
		if err := json.Unmarshal(data, &entries); err != nil {
			return nil, fmt.Errorf("ps output: not a JSON array of containers: %w", jsonErr(err))
		}
	} else {
		dec := json.NewDecoder(bytes.NewReader(data))
		for i := 1; ; i++ {
			var raw json.RawMessage
			err := dec.Decode(&raw)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("ps output: object %d: %w", i, jsonErr(err))
			}
			if string(raw) == "null" && i == 1 && !dec.More() {
				break
			}
			if len(raw) == 0 || raw[0] != '{' {
				return nil, fmt.Errorf("ps output: object %d: not a JSON object", i)
			}
			var e psEntry
			if err := json.Unmarshal(raw, &e); err != nil {
				return nil, fmt.Errorf("ps output: object %d: %w", i, jsonErr(err))
			}
			entries = append(entries, e)
		}
	}
	out := make([]Container, 0, len(entries))
	for i, e := range entries {
		c, err := e.container()
		if err != nil {
			return nil, fmt.Errorf("ps output: container %d: %w", i+1, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// jsonErr keeps the position and the kind of a JSON error but drops any quoted input.
func jsonErr(err error) error { return errors.New(jsonerr.Describe(err)) }

func (e psEntry) container() (Container, error) {
	c := Container{
		ID: e.ID, Name: e.Name, Image: e.Image, Command: e.Command, Project: e.Project,
		Service: e.Service, State: strings.ToLower(e.State), Health: strings.ToLower(e.Health),
		Status: e.Status, ExitCode: e.ExitCode, Publishers: e.Publishers,
	}
	if strings.HasPrefix(c.Command, `"`) {
		if s, err := strconv.Unquote(c.Command); err == nil {
			c.Command = s
		}
	}
	if c.Name == "" && len(e.Names) > 0 {
		var names string
		var list []string
		switch {
		case json.Unmarshal(e.Names, &names) == nil:
			c.Name, _, _ = strings.Cut(names, ",")
		case json.Unmarshal(e.Names, &list) == nil && len(list) > 0:
			c.Name = strings.TrimPrefix(list[0], "/")
		}
	}
	labels, err := parseLabels(e.Labels)
	if err != nil {
		return c, err
	}
	c.Labels = labels
	if c.Service == "" {
		c.Service = labels[ServiceLabel]
	}
	if c.State == "exited" && c.ExitCode == 0 {
		c.ExitCode = ExitCodeFromStatus(c.Status)
	}
	return c, nil
}

func parseLabels(raw json.RawMessage) (map[string]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err == nil {
		return m, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, errors.New("field Labels: want an object or a string")
	}
	if s == "" {
		return nil, nil
	}
	m = map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		if k != "" {
			m[k] = v
		}
	}
	return m, nil
}

var exitedRe = regexp.MustCompile(`^Exited \((-?\d+)\)`)

// ExitCodeFromStatus reads N from docker's status text "Exited (N) 3 seconds ago"; it
// is 0 for any other text and for an N that is not an int. The Engine API's container
// list (internal/engine) carries an exited container's code only in that text.
func ExitCodeFromStatus(status string) int {
	m := exitedRe.FindStringSubmatch(status)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return 0
	}
	return n
}
