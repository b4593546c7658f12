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

// exampleBundle is a minimal bundle: manifest.json and compose.yaml in a tar.
func exampleBundle() []byte {
	b, err := buildExampleBundle()
	if err != nil {
		panic(err)
	}
	return b
}

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
	sha, _, err := fake.PublishBundle("env-dev-01", exampleBundle())
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

func ExampleIsTemporary() {
	auth := faketenancy.NewMemoryAuthority()
	fake := faketenancy.New(faketenancy.Options{Authority: auth, LeaseBudget: 1})
	defer fake.Close()
	token := auth.Token("env-dev-01")
	client, _ := tenancy.New(tenancy.Config{
		BaseURL: fake.URL(), HTTPClient: &http.Client{},
		Token: func(context.Context) (secret.Value, error) { return secret.New(token), nil },
	})
	sha, _, _ := fake.PublishBundle("env-dev-01", exampleBundle())

	_, err := client.Lease(context.Background(), "env-dev-01", sha)
	fmt.Println("first lease:", err)
	_, err = client.Lease(context.Background(), "env-dev-01", sha)
	after, _ := tenancy.RetryAfter(err)
	var apiErr *tenancy.APIError
	errors.As(err, &apiErr)
	fmt.Println("second lease:", apiErr.Code(), "temporary:", tenancy.IsTemporary(err), "retry after:", after.Round(time.Hour))

	fake.SetFaults(faketenancy.Faults{Status: map[string]int{"checkin": http.StatusConflict}})
	_, err = client.Checkin(context.Background(), tenancy.Checkin{EnvID: "env-dev-01"})
	fmt.Println("env mismatch:", errors.Is(err, tenancy.ErrEnvMismatch), "temporary:", tenancy.IsTemporary(err))
	// Output:
	// first lease: <nil>
	// second lease: RATE_LIMITED temporary: true retry after: 1h0m0s
	// env mismatch: true temporary: false
}
