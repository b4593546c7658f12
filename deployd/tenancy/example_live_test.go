package tenancy_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/deployd/tenancy"
)

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
