package deployd_test

import (
	"fmt"
	"time"

	"github.com/monky/monky-deployd/deployd"
)

// A Config built in code starts from DefaultConfig, sets what has no default and what
// differs, and is checked with Validate.
func ExampleDefaultConfig() {
	cfg := deployd.DefaultConfig()
	cfg.EnvID = "env-dev-01"
	cfg.Tenancy.URL = "https://tenancy.monky.internal"
	cfg.Tenancy.Transport = "system"
	cfg.Bao.Addr = "https://bao.monky.internal:8200"
	cfg.Compose.HealthTimeout = deployd.Duration(2 * time.Minute)
	if err := cfg.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.StatePath(), cfg.Compose.KeepReleases, cfg.Compose.HealthTimeout)
	// Output: /var/lib/monky-deployd/state.json 3 2m0s
}
