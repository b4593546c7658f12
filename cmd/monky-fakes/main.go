package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/monky/monky-deployd/deployd/deploydtest/fakebao"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/fakes/admin"
	"github.com/monky/monky-deployd/internal/fakes/stdinwatch"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// addresses is the line printed on stdout.
type addresses struct {
	TenancyURL string `json:"tenancy_url"`
	BaoAddr    string `json:"bao_addr"`
	AdminURL   string `json:"admin_url"`
}

// run is the whole program; it returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("monky-fakes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	adminAddr := fs.String("admin-addr", "127.0.0.1:0", "loopback address of the admin API")
	budget := fs.Int("lease-budget", 5, "leases per environment and window")
	window := fs.Duration("lease-window", time.Hour, "rolling window of the lease budget")
	tokenTTL := fs.Duration("token-ttl", time.Hour, "TTL of OpenBao tokens")
	watchStdin := fs.Bool("watch-stdin", true, "exit when stdin closes")
	verbose := fs.Bool("v", false, "log every request (never a token) to stderr")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "monky-fakes: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	host, _, err := net.SplitHostPort(*adminAddr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		fmt.Fprintf(stderr, "monky-fakes: -admin-addr %q must be a loopback IP and port\n", *adminAddr)
		return 2
	}
	ln, err := net.Listen("tcp", *adminAddr)
	if err != nil {
		fmt.Fprintf(stderr, "monky-fakes: %v\n", err)
		return 1
	}
	bao := fakebao.New(fakebao.Options{TokenTTL: *tokenTTL, Logger: log.With("fake", "bao")})
	defer bao.Close()
	ten := faketenancy.New(faketenancy.Options{Authority: bao, LeaseBudget: *budget, LeaseWindow: *window, Logger: log.With("fake", "tenancy")})
	defer ten.Close()
	srv := &http.Server{Handler: admin.New(ten, bao, log.With("fake", "admin")), ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	// Backstop for the early returns; the normal path shuts down gracefully below.
	// Close only reports errors of closing listeners, and the process is exiting.
	defer func() { _ = srv.Close() }()

	line, _ := json.Marshal(addresses{TenancyURL: ten.URL(), BaoAddr: bao.URL(), AdminURL: "http://" + ln.Addr().String()})
	if _, err := fmt.Fprintf(stdout, "%s\n", line); err != nil {
		return 1
	}
	log.Info("monky-fakes serving", "tenancy_url", ten.URL(), "bao_addr", bao.URL(), "admin_url", "http://"+ln.Addr().String())

	ctx, cancel := stdinwatch.Context(ctx, stdin, *watchStdin)
	defer cancel()
	select {
	case <-ctx.Done():
		if errors.Is(context.Cause(ctx), stdinwatch.ErrClosed) {
			log.Info("monky-fakes stopping: stdin closed")
		} else {
			log.Info("monky-fakes stopping: signal")
		}
	case err := <-serveErr:
		if !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "monky-fakes: admin API: %v\n", err)
			return 1
		}
	}
	shutdown, stopShutdown := context.WithTimeout(context.Background(), 5*time.Second)
	defer stopShutdown()
	_ = srv.Shutdown(shutdown)
	return 0
}
