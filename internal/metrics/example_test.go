package metrics_test

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/monky/monky-deployd/internal/metrics"
)

func ExampleFormat() {
	data, err := metrics.Format(metrics.Snapshot{
		EnvID:        "env-dev-01",
		Version:      "0.1.0",
		LastRun:      time.Unix(1796031005, 0),
		LastCheckin:  time.Unix(1796031001, 0),
		LastResult:   "applied",
		TickDuration: 4 * time.Second,
		LiveSerial:   17,
		TokenTTL:     time.Hour,
		Verdict:      "ok",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Print the samples only, without the HELP and TYPE lines.
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if !strings.HasPrefix(line, "#") {
			fmt.Println(line)
		}
	}
	// Output:
	// monky_deployd_info{env_id="env-dev-01",version="0.1.0",live_sha=""} 1
	// monky_deployd_last_run_timestamp_seconds 1796031005
	// monky_deployd_last_checkin_timestamp_seconds 1796031001
	// monky_deployd_last_result{result="applied",code=""} 1
	// monky_deployd_tick_duration_seconds 4
	// monky_deployd_live_serial 17
	// monky_deployd_token_ttl_seconds 3600
	// monky_deployd_env_mismatch_latched 0
	// monky_deployd_exit_code 0
	// monky_deployd_last_restore{result=""} 0
	// monky_deployd_images_removed 0
	// monky_deployd_images_reclaimed_bytes 0
	// monky_deployd_status{verdict="ok"} 0
	// monky_deployd_condition{code="",exit=""} 0
	// monky_deployd_condition_since_timestamp_seconds 0
	// monky_deployd_condition_runs 0
	// monky_deployd_next_attempt_timestamp_seconds 0
	// monky_deployd_deferred{why=""} 0
	// monky_deployd_deferred_until_timestamp_seconds 0
	// monky_deployd_tenancy_unreached_since_timestamp_seconds 0
}

func ExampleWrite() {
	dir, err := os.MkdirTemp("", "textfile")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = os.RemoveAll(dir) }()

	err = metrics.Write(dir+"/monky-deployd.prom", metrics.Snapshot{LastCode: "not a code"})
	fmt.Println(err)
	// Output:
	// metrics: snapshot field LastCode: must be a stable code of [A-Z0-9_] or empty
}
