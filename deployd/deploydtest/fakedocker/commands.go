package fakedocker

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/docker/go-units"
)

var upFlags = flagSpec{
	"-d": false, "--detach": false, "--remove-orphans": false, "--force-recreate": false,
	"--no-recreate": false, "--no-build": false, "--build": false, "--wait": false,
	"--quiet-pull": false, "--no-color": false, "--pull": true, "--wait-timeout": true,
}

func (r *run) up(args []string) int {
	vals, pos, err := parseFlags("docker compose up", args, upFlags, false)
	if err != nil {
		return r.usage(err)
	}
	if !has(vals, "-d", "--detach") {
		return r.usage(usageError("up without -d would attach to the containers and never return; the fake refuses it"))
	}
	if len(pos) > 0 {
		return r.usage(usageError("up of selected services is not supported by the fake"))
	}
	return r.do("up", func(st *fakeState, out *outcome) error {
		services, healthchecks, images, err := projectFile(r.projectDir, r.files)
		if err != nil {
			return out.fail("%v\n", err)
		}
		st.Up = true
		st.Project = r.project
		st.Dir = r.projectDir
		st.Services = services
		st.Healthchecks = healthchecks
		st.ServiceImages = serviceImages(r.project, services, images)
		st.Generation++
		st.PSCalls, st.Starts = 0, nil
		st.UpAt = time.Now().Unix()
		for _, c := range r.containers(st) {
			hold(st, c.image, r.service(st, c.service).ImageSize)
			fmt.Fprintf(&out.stderr, " Container %s  Started\n", c.name)
		}
		return nil
	})
}

var downFlags = flagSpec{
	"--remove-orphans": false, "-v": false, "--volumes": false,
	"-t": true, "--timeout": true, "--rmi": true,
}

func (r *run) down(args []string) int {
	vals, pos, err := parseFlags("docker compose down", args, downFlags, false)
	if err != nil {
		return r.usage(err)
	}
	if len(pos) > 0 {
		return r.usage(usageError("down of selected services is not supported by the fake"))
	}
	return r.do("down", func(st *fakeState, out *outcome) error {
		for _, c := range r.containers(st) {
			fmt.Fprintf(&out.stderr, " Container %s  Removed\n", c.name)
		}
		st.Up = false
		st.PSCalls, st.Starts = 0, nil
		st.DownVolumes = has(vals, "-v", "--volumes")
		if st.DownVolumes {
			fmt.Fprintf(&out.stderr, " Volume %s_data  Removed\n", r.project)
		}
		return nil
	})
}

var psFlags = flagSpec{
	"-a": false, "--all": false, "--format": true, "-q": false, "--quiet": false,
	"--services": false, "--no-trunc": false,
}

func (r *run) ps(args []string) int {
	vals, pos, err := parseFlags("docker compose ps", args, psFlags, false)
	if err != nil {
		return r.usage(err)
	}
	format := last(vals, "--format")
	switch format {
	case "", "table", "json":
	default:
		return r.usage(usageError(fmt.Sprintf("ps --format %q: the fake knows table and json", format)))
	}
	all := has(vals, "-a", "--all")
	return r.do("ps", func(st *fakeState, out *outcome) error {
		n := st.PSCalls
		st.PSCalls++
		var shown []container
		for _, c := range r.containers(st) {
			if len(pos) > 0 && !slices.Contains(pos, c.service) {
				continue
			}
			r.stepTo(st, &c, n)
			if !all && !c.running() {
				continue
			}
			shown = append(shown, c)
		}
		switch {
		case has(vals, "--services"):
			for _, c := range shown {
				fmt.Fprintln(&out.stdout, c.service)
			}
		case has(vals, "-q", "--quiet"):
			for _, c := range shown {
				fmt.Fprintln(&out.stdout, c.id(st))
			}
		case format == "json":
			return r.psJSON(st, shown, n, has(vals, "--no-trunc"), out)
		default:
			fmt.Fprintln(&out.stdout, "NAME\tIMAGE\tSERVICE\tSTATUS")
			for _, c := range shown {
				fmt.Fprintf(&out.stdout, "%s\t%s\t%s\t%s\n", c.name, c.image, c.service, c.status(n))
			}
		}
		return nil
	})
}

var logsFlags = flagSpec{
	"--no-color": false, "--tail": true, "-n": true, "-t": false, "--timestamps": false,
	"--no-log-prefix": false, "-f": false, "--follow": false,
}

func (r *run) logs(args []string) int {
	vals, pos, err := parseFlags("docker compose logs", args, logsFlags, false)
	if err != nil {
		return r.usage(err)
	}
	if has(vals, "-f", "--follow") {
		return r.usage(usageError("logs --follow would never end; the fake refuses it"))
	}
	tail := -1
	if t := last(vals, "--tail", "-n"); t != "" && t != "all" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 {
			return r.usage(usageError(fmt.Sprintf("logs --tail %q: want a number or all", t)))
		}
		tail = n
	}
	noPrefix := has(vals, "--no-log-prefix")
	return r.do("logs", func(st *fakeState, out *outcome) error {
		known := r.serviceNames(st)
		if fromFiles, _, _, err := projectFile(r.projectDir, r.files); err == nil {
			known = append(known, fromFiles...)
		}
		for _, svc := range pos {
			if !slices.Contains(known, svc) {
				return out.fail("no such service: %s\n", svc)
			}
		}
		for _, c := range r.containers(st) {
			if len(pos) > 0 && !slices.Contains(pos, c.service) {
				continue
			}
			lines := strings.Split(strings.TrimSuffix(r.service(st, c.service).Logs, "\n"), "\n")
			if len(lines) == 1 && lines[0] == "" {
				continue
			}
			if tail >= 0 && len(lines) > tail {
				lines = lines[len(lines)-tail:]
			}
			prefix := c.name + "  | "
			if noPrefix {
				prefix = ""
			}
			for _, l := range lines {
				fmt.Fprintln(&out.stdout, prefix+l)
			}
		}
		return nil
	})
}

// apiVersion is the Engine API version the fake engine (and the fake's docker version)
// reports.
const apiVersion = "1.47"

// versionOutput prints docker version, through a text/template like docker does.
func versionOutput(out *outcome, format, server string) error {
	type part struct {
		Version    string
		APIVersion string
		Os, Arch   string
	}
	data := struct{ Client, Server part }{
		Client: part{Version: DefaultServerVersion, APIVersion: apiVersion, Os: "linux", Arch: "amd64"},
		Server: part{Version: server, APIVersion: apiVersion, Os: "linux", Arch: "amd64"},
	}
	if format == "" {
		format = "Client:\n Version:\t{{.Client.Version}}\n API version:\t{{.Client.APIVersion}}\n\nServer:\n Engine:\n  Version:\t{{.Server.Version}}\n  API version:\t{{.Server.APIVersion}}"
	}
	if format == "json" || format == "{{json .}}" {
		return out.printJSON(data)
	}
	t, err := template.New("version").Parse(format)
	if err != nil {
		return out.fail("template parsing error: %v\n", err)
	}
	if err := t.Execute(&out.stdout, data); err != nil {
		return out.fail("template: %v\n", err)
	}
	out.stdout.WriteString("\n")
	return nil
}

// service is the script of a service in the release that is up: the release's own
// script (Script.Releases, by the base name of the project directory) when it has one
// for the service, else Script.Services.
func (r *run) service(st *fakeState, name string) Service {
	if svc, ok := r.script.Releases[filepath.Base(st.Dir)][name]; ok && st.Dir != "" {
		return svc
	}
	return r.script.Services[name]
}

// container is one (fake) container of a service; the fake runs one per service.
type container struct {
	service string
	name    string
	image   string
	hasHC   bool
	state   State
	// restartedAt is when docker last started it again (fakeState.Starts), in Unix
	// nanoseconds; 0 when it has run since the up.
	restartedAt int64
}

func (r *run) serviceNames(st *fakeState) []string {
	names := slices.AppendSeq(slices.Clone(st.Services), maps.Keys(r.script.Services))
	names = slices.AppendSeq(names, maps.Keys(r.script.Releases[filepath.Base(st.Dir)]))
	slices.Sort(names)
	return slices.Compact(names)
}

// containers lists the project's containers: none unless it is up.
func (r *run) containers(st *fakeState) []container {
	if !st.Up {
		return nil
	}
	project := cmp.Or(st.Project, r.project)
	var cs []container
	for _, name := range r.serviceNames(st) {
		svc := r.service(st, name)
		c := container{
			service: name,
			name:    project + "-" + name + "-1",
			image:   cmp.Or(svc.Image, st.ServiceImages[name], "example.invalid/"+name+":latest"),
			hasHC:   slices.Contains(st.Healthchecks, name),
		}
		if svc.Healthcheck != nil {
			c.hasHC = *svc.Healthcheck
		}
		if slices.ContainsFunc(svc.States, func(s State) bool { return s.Health != "" }) {
			c.hasHC = true
		}
		cs = append(cs, c)
	}
	return cs
}

func (c container) stateName() string { return cmp.Or(c.state.State, "running") }

func (c container) running() bool {
	switch c.stateName() {
	case "running", "restarting", "paused":
		return true
	}
	return false
}

// health is what docker shows: only running containers with a healthcheck have one.
func (c container) health() string {
	if !c.hasHC || c.stateName() != "running" {
		return ""
	}
	return cmp.Or(c.state.Health, "healthy")
}

func (c container) id(st *fakeState) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%d", st.Project, c.service, st.Generation))
	return hex.EncodeToString(sum[:])
}

// stepTo puts c in the state its script gives it at ps call n. A restart count other
// than the one last seen (fakeState.Starts) means docker started the container again:
// its uptime counts from now, in real time.
func (r *run) stepTo(st *fakeState, c *container, n int) {
	c.state = r.service(st, c.service).step(n)
	rec, seen := st.Starts[c.service]
	if !seen || rec.RestartCount != c.state.RestartCount {
		rec = started{RestartCount: c.state.RestartCount}
		if seen {
			rec.At = time.Now().UnixNano()
		}
		if st.Starts == nil {
			st.Starts = map[string]started{}
		}
		st.Starts[c.service] = rec
	}
	c.restartedAt = rec.At
}

// status is docker's status text; the uptime grows by two seconds per ps call, or
// since a restart as docker writes it (go-units' HumanDuration), in real time.
func (c container) status(n int) string {
	if c.state.Status != "" {
		return c.state.Status
	}
	up := fmt.Sprintf("Up %d seconds", 2*n+3)
	if c.restartedAt != 0 {
		up = "Up " + units.HumanDuration(time.Since(time.Unix(0, c.restartedAt)))
	}
	switch c.stateName() {
	case "running":
		return up + healthSuffix[c.health()]
	case "exited":
		return fmt.Sprintf("Exited (%d) 2 seconds ago", c.state.ExitCode)
	case "restarting":
		return fmt.Sprintf("Restarting (%d) 1 second ago", c.state.ExitCode)
	case "paused":
		return up + " (Paused)"
	case "created":
		return "Created"
	case "dead":
		return "Dead"
	}
	return c.stateName()
}

// healthSuffix is what docker's status text adds for each health (moby's
// Health.String); nothing without a healthcheck.
var healthSuffix = map[string]string{"healthy": " (healthy)", "unhealthy": " (unhealthy)", "starting": " (health: starting)"}

// publisher is compose's api.PortPublisher.
type publisher struct {
	URL           string
	TargetPort    int
	PublishedPort int
	Protocol      string
}

// psJSON prints ps --format json in the shape the script selects: compose 2.21+
// prints docker's container formatter as one object per line (keys sorted, most
// values strings, nothing for no containers); compose 2.20 printed its
// api.ContainerSummary slice as one array.
func (r *run) psJSON(st *fakeState, cs []container, n int, noTrunc bool, out *outcome) error {
	created := time.Unix(st.UpAt, 0).UTC()
	runningFor := max(time.Since(created).Round(time.Second), time.Second)
	if r.script.PSFormat == PSArray {
		type summary struct {
			ID         string
			Name       string
			Image      string
			Command    string
			Project    string
			Service    string
			Created    int64
			State      string
			Status     string
			Health     string
			ExitCode   int
			Publishers []publisher
		}
		list := make([]summary, 0, len(cs))
		for _, c := range cs {
			list = append(list, summary{
				ID: c.id(st), Name: c.name, Image: c.image, Command: containerCommand,
				Project: st.Project, Service: c.service, Created: created.Unix(),
				State: c.stateName(), Status: c.status(n), Health: c.health(),
				ExitCode: c.state.ExitCode,
			})
		}
		return out.printJSON(list)
	}
	for _, c := range cs {
		id := c.id(st)
		if !noTrunc {
			id = id[:12]
		}
		obj := map[string]any{
			"Command":      strconv.Quote(containerCommand),
			"CreatedAt":    created.Format("2006-01-02 15:04:05 -0700 MST"),
			"ExitCode":     c.state.ExitCode,
			"Health":       c.health(),
			"ID":           id,
			"Image":        c.image,
			"Labels":       "com.docker.compose.project=" + st.Project + ",com.docker.compose.service=" + c.service,
			"LocalVolumes": "0",
			"Mounts":       "",
			"Name":         c.name,
			"Names":        c.name,
			"Networks":     st.Project + "_default",
			"Ports":        "",
			"Project":      st.Project,
			"Publishers":   []publisher{},
			"RunningFor":   fmt.Sprintf("%d seconds ago", int(runningFor.Seconds())),
			"Service":      c.service,
			"Size":         "0B",
			"State":        c.stateName(),
			"Status":       c.status(n),
		}
		if err := out.printJSON(obj); err != nil {
			return err
		}
	}
	return nil
}

// fail prints a message on stderr and makes the command exit 1; the command itself
// succeeded (nil).
func (out *outcome) fail(format string, args ...any) error {
	fmt.Fprintf(&out.stderr, format, args...)
	out.code = 1
	return nil
}

// printJSON prints v as one line of JSON on out's stdout.
func (out *outcome) printJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	out.stdout.Write(append(b, '\n'))
	return nil
}

// inspect prints docker inspect --type container for containers of the project named
// by ID (full or a prefix of at least 12 characters) or by name, in the state of the
// last ps call: State (fakeState, ExitCode, Health with its Log), RestartCount and the
// compose labels, as docker does. An unknown container is an error, as in docker.
func (r *run) inspect(args []string) int {
	vals, pos, err := parseFlags("docker inspect", args, flagSpec{"--type": true, "-f": true, "--format": true}, false)
	if err != nil {
		return r.usage(err)
	}
	if t := last(vals, "--type"); t != "container" {
		return r.usage(usageError(fmt.Sprintf("inspect --type %q: the fake inspects only --type container", t)))
	}
	if last(vals, "-f", "--format") != "" {
		return r.usage(usageError("inspect --format: the fake prints only the JSON array"))
	}
	if len(pos) == 0 {
		return r.usage(usageError("docker inspect requires at least 1 argument"))
	}
	return r.do("inspect", func(st *fakeState, out *outcome) error {
		list := []map[string]any{}
		for _, want := range pos {
			c, ok := findContainer(r, st, want)
			if !ok {
				_ = out.fail("Error: No such container: %s\n", want)
				continue
			}
			list = append(list, c.inspectJSON(st))
		}
		b, err := json.MarshalIndent(list, "", "    ")
		if err != nil {
			return err
		}
		out.stdout.Write(append(b, '\n'))
		return nil
	})
}

// inspectJSON is the part of docker inspect's container object that the agent reads,
// with docker's key names and kinds (State.Health is absent without a healthcheck).
func (c container) inspectJSON(st *fakeState) map[string]any {
	up := time.Unix(st.UpAt, 0).UTC()
	state := map[string]any{
		"Status":     c.stateName(),
		"Running":    c.stateName() == "running",
		"Paused":     c.stateName() == "paused",
		"Restarting": c.stateName() == "restarting",
		"OOMKilled":  false,
		"Dead":       c.stateName() == "dead",
		"Pid":        0,
		"ExitCode":   c.state.ExitCode,
		"Error":      "",
		"StartedAt":  up.Format(time.RFC3339Nano),
		"FinishedAt": "0001-01-01T00:00:00Z",
	}
	if c.hasHC {
		health := cmp.Or(c.state.Health, "healthy")
		exit, output, streak := 0, "ok", 0
		if health != "healthy" {
			exit, output, streak = 1, "unhealthy", 3
		}
		output = cmp.Or(c.state.HealthOutput, output)
		var log []map[string]any
		for i := range 3 {
			at := up.Add(time.Duration(i+1) * time.Second)
			log = append(log, map[string]any{
				"Start": at.Format(time.RFC3339Nano), "End": at.Add(50 * time.Millisecond).Format(time.RFC3339Nano),
				"ExitCode": exit, "Output": output,
			})
		}
		state["Health"] = map[string]any{"Status": health, "FailingStreak": streak, "Log": log}
	}
	return map[string]any{
		"Id":           c.id(st),
		"Created":      up.Add(-time.Second).Format(time.RFC3339Nano),
		"Path":         containerCommand,
		"Args":         []string{},
		"Name":         "/" + c.name,
		"Image":        ImageID(c.image),
		"RestartCount": c.state.RestartCount,
		"Platform":     "linux",
		"Driver":       "overlay2",
		"Mounts":       []any{},
		"State":        state,
		"Config": map[string]any{
			"Image":      c.image,
			"Labels":     c.labels(st),
			"Entrypoint": []string{containerCommand},
			"Cmd":        []string{},
		},
	}
}

// containerCommand is the command of every fake container, as ps and inspect show it.
const containerCommand = "/entrypoint.sh"

// labels are the compose labels of the container.
func (c container) labels(st *fakeState) map[string]string {
	return map[string]string{
		"com.docker.compose.project": st.Project,
		"com.docker.compose.service": c.service,
	}
}

// findContainer finds the container named by want (full ID, an ID prefix of at least
// 12 characters, or the name with or without its leading "/"), in the state of the
// last ps call, for docker inspect and GET /containers/{id}/json alike.
func findContainer(r *run, st *fakeState, want string) (container, bool) {
	name := strings.TrimPrefix(want, "/")
	for _, c := range r.containers(st) {
		id := c.id(st)
		if c.name == name || id == want || (len(want) >= 12 && strings.HasPrefix(id, want)) {
			r.stepTo(st, &c, max(st.PSCalls-1, 0))
			return c, true
		}
	}
	return container{}, false
}
