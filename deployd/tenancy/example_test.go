package tenancy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/deployd/tenancy"
)

func Example() {
	ctx := context.Background()
	auth := faketenancy.NewMemoryAuthority()
	fake := faketenancy.New(faketenancy.Options{Authority: auth})
	defer fake.Close()
	token := auth.Token("env-dev-01") // on a box: the OpenBao token from bao.token

	client, err := tenancy.New(tenancy.Config{
		BaseURL:    fake.URL(),
		HTTPClient: &http.Client{},
		Token:      func(context.Context) (secret.Value, error) { return secret.New(token), nil },
		UserAgent:  "monky-deployd/0.1.0",
	})
	if err != nil {
		panic(err)
	}
	b, err := faketenancy.BuildBundle(faketenancy.BundleSpec{EnvID: "env-dev-01"}) // a rendered bundle
	if err != nil {
		panic(err)
	}
	sha, _, err := fake.PublishBundle("env-dev-01", b.Data)
	if err != nil {
		panic(err)
	}

	ins, err := client.Checkin(ctx, tenancy.Checkin{EnvID: "env-dev-01", AgentVersion: "0.1.0"})
	if err != nil {
		panic(err)
	}
	fmt.Println("action:", ins.Action, "serial:", ins.Serial, "sha matches:", ins.SHA == sha)

	var bundle bytes.Buffer
	n, err := client.Bundle(ctx, ins.SHA, &bundle)
	fmt.Println("downloaded:", n == int64(bundle.Len()), err)

	lease, err := client.Lease(ctx, "env-dev-01", ins.SHA)
	fmt.Println("lease:", lease.AuthMount, lease.Role, "grant printed as", lease.Grant, err)

	err = client.Report(ctx, tenancy.Report{EnvID: "env-dev-01", SHA: ins.SHA, Serial: ins.Serial,
		Result: tenancy.ResultApplied, Duration: 42 * time.Second})
	fmt.Println("report:", err, fake.Reports("env-dev-01")[0].DurationMS)
	// Output:
	// action: apply serial: 1 sha matches: true
	// downloaded: true <nil>
	// lease: jwt-tenancy see-env grant printed as [REDACTED] <nil>
	// report: <nil> 42000
}

func ExampleRetryAfter() {
	auth := faketenancy.NewMemoryAuthority()
	fake := faketenancy.New(faketenancy.Options{Authority: auth, LeaseBudget: 1})
	defer fake.Close()
	token := auth.Token("env-dev-01")
	client, _ := tenancy.New(tenancy.Config{
		BaseURL: fake.URL(), HTTPClient: &http.Client{},
		Token: func(context.Context) (secret.Value, error) { return secret.New(token), nil },
	})
	b, _ := faketenancy.BuildBundle(faketenancy.BundleSpec{EnvID: "env-dev-01"})
	sha, _, _ := fake.PublishBundle("env-dev-01", b.Data)

	_, err := client.Lease(context.Background(), "env-dev-01", sha)
	fmt.Println("first lease:", err)
	_, err = client.Lease(context.Background(), "env-dev-01", sha)
	after, _ := tenancy.RetryAfter(err)
	var apiErr *tenancy.APIError
	errors.As(err, &apiErr)
	fmt.Println("second lease:", apiErr.Code(), "retry after:", after.Round(time.Hour))

	fake.SetFaults(faketenancy.Faults{Status: map[string]int{"checkin": http.StatusConflict}})
	_, err = client.Checkin(context.Background(), tenancy.Checkin{EnvID: "env-dev-01"})
	fmt.Println("env mismatch:", errors.Is(err, tenancy.ErrEnvMismatch))
	// Output:
	// first lease: <nil>
	// second lease: RATE_LIMITED retry after: 1h0m0s
	// env mismatch: true
}

// ExampleClient_Checkin_live sends the live release's health with the heartbeat: one
// service restarting, then docker out of reach (a reason, no services), then nothing
// live; and one live object the client refuses before sending.
func ExampleClient_Checkin_live() {
	auth := faketenancy.NewMemoryAuthority()
	fake := faketenancy.New(faketenancy.Options{Authority: auth})
	defer fake.Close()
	token := auth.Token("env-dev-01")
	client, err := tenancy.New(tenancy.Config{
		BaseURL: fake.URL(), HTTPClient: &http.Client{},
		Token: func(context.Context) (secret.Value, error) { return secret.New(token), nil },
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	at := time.Date(2026, 3, 4, 10, 22, 33, 0, time.UTC)
	send := func(live *tenancy.Live) {
		_, err := client.Checkin(ctx, tenancy.Checkin{EnvID: "env-dev-01", AgentVersion: "0.1.0", Live: live})
		if err != nil {
			fmt.Println("refused:", err)
			return
		}
		l, ok := fake.LastLive("env-dev-01")
		switch {
		case !ok:
			fmt.Println("tenancy sees: nothing live")
		case l.Reason != "":
			fmt.Println("tenancy sees: docker not asked:", l.Reason)
		default:
			fmt.Println("tenancy sees: healthy", *l.Healthy, "services", l.Services)
		}
	}
	send(&tenancy.Live{ObservedAt: at, Healthy: false, Services: []tenancy.LiveService{
		{Name: "app", State: "restarting", ExitCode: 137, Restarts: 4},
	}})
	send(&tenancy.Live{ObservedAt: at, Reason: "docker: Cannot connect to the Docker daemon"})
	send(nil)
	send(&tenancy.Live{ObservedAt: at, Healthy: true, Services: []tenancy.LiveService{{State: "running"}}})
	// Output:
	// tenancy sees: healthy false services [{app restarting  137 4}]
	// tenancy sees: docker not asked: docker: Cannot connect to the Docker daemon
	// tenancy sees: nothing live
	// refused: tenancy: checkin: live.services[0].name is required: tenancy: invalid argument
}
