package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], http.DefaultTransport, os.Stderr))
}

// run is the whole program; rt carries the request, so that a test runs it in-process.
func run(ctx context.Context, args []string, rt http.RoundTripper, stderr io.Writer) int {
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "check-in URL (required)")
	tokenFile := fs.String("token-file", "", "file holding the bearer (required)")
	env := fs.String("env", "", "env_id sent in the body (required)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *url == "" || *tokenFile == "" || *env == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: floor -url URL -token-file PATH -env ENV")
		return 2
	}
	tok, err := os.ReadFile(*tokenFile)
	if err != nil {
		fmt.Fprintf(stderr, "floor: %v\n", err)
		return 1
	}
	// a body of the size and shape of the agent's check-in (docs/PROTOCOL.md)
	data, err := json.Marshal(map[string]any{
		"env_id": *env, "agent_version": "0.0.0-floor", "current_sha": strings.Repeat("0", 64),
		"current_serial": 1, "last_result": "applied", "last_code": "",
		"host": map[string]any{"hostname": "floor", "docker_version": "27.3.1", "free_mb": 4096},
	})
	if err != nil {
		fmt.Fprintf(stderr, "floor: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, *url, bytes.NewReader(data))
	if err != nil {
		fmt.Fprintf(stderr, "floor: %v\n", err)
		return 1
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "floor: %v\n", err)
		return 1
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		// The status only: an error body could echo what it was sent.
		fmt.Fprintf(stderr, "floor: %s answered %d\n", *url, resp.StatusCode)
		return 1
	}
	return 0
}
