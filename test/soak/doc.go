// Package soak runs monky-deployd for a long time against the fakes while faults rain
// on it, and measures whether it stays flat (docs/OPERATIONS.md, "A soak: the agent
// over time").
//
// TestSoak runs two agents side by side against one fake tenancy and one fake OpenBao
// (deployd/deploydtest/fakestack), each with its own fake docker:
//
//   - the real binary, `monky-deployd run --loop`, restarted now and then with SIGTERM
//     (its loop must end with 0) or SIGKILL (its process group, as systemd does at the
//     end of TimeoutStopSec). From outside the soak samples its anonymous resident
//     memory (RssAnon: the heap and stacks, not the executable's pages, which the
//     resident set gains as code paths run for the first time) and threads
//     (/proc/<pid>/status) and its open file descriptors (/proc/<pid>/fd);
//   - deployd.Agent.Loop in the test process, rebuilt now and then (the loop's context
//     cancelled, the agent closed, a new one made), whose goroutines the soak counts
//     with the runtime (the binary has no pprof).
//
// A seeded PRNG injects faults over time: tenancy 5xx, 429, 401 and time-outs on each
// of the four calls, a truncated bundle download, OpenBao sealed, docker compose up
// and ps failing or slow, an unhealthy release, bundle churn (new good bundles,
// refused ones) and rotations of the secret canary. At the end the faults stop, one
// more bundle is published, and both agents must apply it.
//
// It asserts: every tick's exit code and every exit of the binary is in the contract
// (0, 75, 78, 1), the loop never ends by itself and ends with 0 on SIGTERM; no
// environment has more leases in any window than its budget, and no lease is spent
// on a refused bundle; no secret canary appears anywhere but a release's .env (the
// agents' logs, reports, check-ins, requests, state dirs, metrics file, the fake
// docker's record, `status` output); and the least-squares slopes of RSS, fds and
// goroutines after a warm-up stay under their limits, or their fitted rise within a
// one-time allowance (stats_test.go, gate).
//
// It runs only when given a duration:
//
//	go test -count=1 -v -run '^TestSoak$' ./test/soak/ -soak.duration=1m
//	go test -count=1 -v -run '^TestSoak$' -timeout 45m ./test/soak/ -soak.duration=30m \
//	    -soak.report=soak.json -soak.samples=samples.csv
//
// -soak.seed replays a fault schedule (the seed is printed).
package soak
