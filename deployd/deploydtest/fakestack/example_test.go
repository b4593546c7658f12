package fakestack_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"

	"github.com/monky/monky-deployd/deployd/deploydtest/fakestack"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/deployd/tenancy"
)

// Example starts both fakes without a testing.TB, publishes the sample application
// with its secret, and plays a box's tick with the real tenancy client: check-in,
// download, lease (the grant is a fresh one from the fake OpenBao), report.
func Example() {
	ctx := context.Background()
	s, err := fakestack.Start(ctx, fakestack.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()

	const env = "env-dev-01"
	b, err := faketenancy.BuildBundle(faketenancy.SampleApp(env, 1))
	if err != nil {
		fmt.Println(err)
		return
	}
	sha, serial, err := s.Tenancy.PublishBundle(env, b.Data)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("published serial", serial, "with the sha BuildBundle computed:", sha == b.SHA)
	s.Bao.PutSecret(env, "db", map[string]string{"password": "example-password"})

	token, err := s.Login(ctx, env) // what the box's bootstrap does with its grant
	if err != nil {
		fmt.Println(err)
		return
	}
	client, err := tenancy.New(tenancy.Config{BaseURL: s.Tenancy.URL(), HTTPClient: &http.Client{},
		Token: func(context.Context) (secret.Value, error) { return secret.New(token), nil }})
	if err != nil {
		fmt.Println(err)
		return
	}
	ins, err := client.Checkin(ctx, tenancy.Checkin{EnvID: env})
	fmt.Println("check-in:", ins.Action, ins.Serial, err)
	var data bytes.Buffer
	_, err = client.Bundle(ctx, ins.SHA, &data)
	fmt.Println("download is the published bundle:", bytes.Equal(data.Bytes(), b.Data), err)
	lease, err := client.Lease(ctx, env, ins.SHA)
	fmt.Println("lease:", lease.AuthMount, lease.Role, err)
	err = client.Report(ctx, tenancy.Report{EnvID: env, SHA: ins.SHA, Serial: ins.Serial, Result: tenancy.ResultApplied})
	fmt.Println("report:", err)

	for _, r := range s.Tenancy.Reports(env) {
		fmt.Println("tenancy received:", r.Result, r.Serial)
	}
	fmt.Println("leases:", len(s.Tenancy.Leases(env)), "check-ins:", len(s.Tenancy.Checkins(env)))
	// Output:
	// published serial 1 with the sha BuildBundle computed: true
	// check-in: apply 1 <nil>
	// download is the published bundle: true <nil>
	// lease: jwt-tenancy see-env <nil>
	// report: <nil>
	// tenancy received: applied 1
	// leases: 1 check-ins: 1
}
