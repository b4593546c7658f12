package zitimesh

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// meshStartTimeout bounds the quickstart's start: PKI, controller, router enrollment.
// Generous because the CI machine is shared and the first start initialises a database.
const meshStartTimeout = 3 * time.Minute

// cliTimeout bounds one ziti CLI call.
const cliTimeout = time.Minute

// mesh is one `ziti edge quickstart` process and a CLI logged in to it.
type mesh struct {
	bin      string // the ziti CLI
	home     string // the quickstart's --home, also HOME of every CLI call
	ctrl     string // 127.0.0.1:<port> of the controller's edge API
	router   int
	password string
	env      []string

	cmd    *exec.Cmd
	logf   *os.File
	exited chan struct{}
	once   sync.Once
}

// freePort returns a port that was free on 127.0.0.1 a moment ago.
func freePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(tb, ln.Close())
	return port
}

// startMesh starts the quickstart in a fresh home under dir, waits until the controller
// and the router are up and logs the CLI in. Stop is registered with tb.Cleanup.
func startMesh(tb testing.TB, bin, dir string) *mesh {
	tb.Helper()
	home := filepath.Join(dir, "ziti-home")
	require.NoError(tb, os.MkdirAll(filepath.Join(home, "cli"), 0o700))
	pw := make([]byte, 12)
	_, err := rand.Read(pw)
	require.NoError(tb, err)
	m := &mesh{
		bin:      bin,
		home:     home,
		ctrl:     net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(tb))),
		router:   freePort(tb),
		password: hex.EncodeToString(pw),
	}
	// Nothing of the caller's environment but PATH: no ZITI_* variable and no HOME
	// leaks in, and `ziti edge login` writes its config under the temporary home.
	m.env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + filepath.Join(home, "cli"),
		"ZITI_CTRL_BIND_ADDRESS=127.0.0.1",
		"ZITI_CTRL_EDGE_BIND_ADDRESS=127.0.0.1",
	}
	m.logf, err = os.Create(filepath.Join(dir, "quickstart.log"))
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = m.logf.Close() })
	tb.Cleanup(m.stop) // runs first
	m.launch(tb)
	m.cli(tb, "edge", "login", m.ctrl, "--username", "admin", "--password", m.password, "--yes")
	return m
}

// launch starts the quickstart process on m.home and waits for its banner. On a home
// that holds a database the quickstart reuses it and its configs (ctrl.yaml, the
// router's yaml): that is how restart brings the same network back.
func (m *mesh) launch(tb testing.TB) {
	tb.Helper()
	_, ctrlPort, _ := net.SplitHostPort(m.ctrl)
	cmd := exec.Command(m.bin, "edge", "quickstart",
		"--home", m.home,
		"--ctrl-address", "127.0.0.1", "--ctrl-port", ctrlPort,
		"--router-address", "127.0.0.1", "--router-port", strconv.Itoa(m.router),
		"--password", m.password)
	cmd.Env = m.env
	cmd.Dir = filepath.Dir(m.home)
	stdout, err := cmd.StdoutPipe()
	require.NoError(tb, err)
	cmd.Stderr = m.logf
	require.NoError(tb, cmd.Start())
	// Only a started process is what stop stops.
	exited := make(chan struct{})
	m.cmd, m.exited, m.once = cmd, exited, sync.Once{}

	ready := make(chan struct{})
	go func() {
		// Copy the quickstart's stdout into the log and watch for its banner, which it
		// prints once the router accepts connections.
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(m.logf, line)
			if !signalled && strings.Contains(line, "controller and router started") {
				signalled = true
				close(ready)
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case <-ready:
	case <-exited:
		tb.Fatalf("ziti edge quickstart exited before it was ready:\n%s", m.logTail())
	case <-time.After(meshStartTimeout):
		tb.Fatalf("ziti edge quickstart not ready within %s:\n%s", meshStartTimeout, m.logTail())
	}
}

// stop ends the quickstart (SIGTERM, then SIGKILL after 15s) and waits for it. It is
// idempotent until the next launch.
func (m *mesh) stop() {
	if m.cmd == nil {
		return // never started
	}
	m.once.Do(func() {
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.exited:
		case <-time.After(15 * time.Second):
			_ = m.cmd.Process.Kill()
			<-m.exited
		}
	})
}

// logTail returns the end of the quickstart's log for a failure message.
func (m *mesh) logTail() string {
	data, _ := os.ReadFile(m.logf.Name())
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}

// cli runs the ziti CLI against the mesh and returns its stdout; a failure ends the test
// with the CLI's output.
func (m *mesh) cli(tb testing.TB, args ...string) []byte {
	tb.Helper()
	out, err := m.tryCLI(args...)
	require.NoError(tb, err, "ziti %s", strings.Join(args, " "))
	return out
}

func (m *mesh) tryCLI(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, m.bin, args...)
	cmd.Env = m.env
	cmd.Dir = m.home
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%w\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	return stdout.Bytes(), nil
}

// identity creates an identity with the role attributes attrs, enrolls it and returns
// the path of its identity JSON.
func (m *mesh) identity(tb testing.TB, name string, attrs ...string) string {
	tb.Helper()
	jwt := filepath.Join(m.home, name+".jwt")
	args := []string{"edge", "create", "identity", name, "--jwt-output-file", jwt}
	if len(attrs) > 0 {
		args = append(args, "--role-attributes", strings.Join(attrs, ","))
	}
	m.cli(tb, args...)
	out := filepath.Join(m.home, name+".json")
	m.cli(tb, "edge", "enroll", "--jwt", jwt, "--out", out)
	return out
}

// listResult is the shape of `ziti edge list … --output-json`.
type listResult struct {
	Data []map[string]any `json:"data"`
}

// list runs `ziti edge list <what> <filter> --output-json` and returns its data.
func (m *mesh) list(tb testing.TB, what, filter string) []map[string]any {
	tb.Helper()
	out := m.cli(tb, "edge", "list", what, filter, "--output-json")
	var r listResult
	require.NoError(tb, json.Unmarshal(out, &r), "ziti edge list %s: %s", what, out)
	return r.Data
}

// waitTerminator waits until service has at least one terminator: the host's bind has
// reached the router and the controller.
func (m *mesh) waitTerminator(tb testing.TB, service string) {
	tb.Helper()
	filter := fmt.Sprintf(`service.name="%s"`, service)
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if len(m.list(tb, "terminators", filter)) > 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	tb.Fatalf("no terminator for OpenZiti service %q within a minute", service)
}
