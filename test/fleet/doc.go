// Package fleet simulates a fleet of monky-deployd boxes in one process against one
// fake tenancy and one fake OpenBao, to see what the loop's defaults (interval,
// jitter, back-off) do to tenancy (docs/OPERATIONS.md, "A fleet: what the defaults
// do").
//
// Every box is a deployd.Agent with its own state and deploy directories and its own
// fake docker (the real fake, cmd/fake-docker, one hard link and one fake-docker.json
// per box, run once per compose call: an apply costs an up and a ps, an idle tick no
// subprocess), run by deployd.Agent.Loop, so the first-tick pause, the back-off and
// the jitter are the production code. Time is scaled down: the loops' interval and
// tenancy's next_checkin_s are -fleet.interval (2s; production says 1m, so 1:30).
//
// TestFleet runs the same scenario twice, with the loop's jitter (LoopOptions.Rand
// nil, as in production) and without it (Rand always answers the middle of the
// range, so every pause is exact):
//
//  1. every box starts at the same moment (a fleet restarted together) and
//     bootstraps; the spread of the first check-ins is measured;
//  2. a bundle is published to every environment at once; the time until 50, 95
//     and 100 % of the boxes have reported it applied is measured;
//  3. tenancy answers 503 to every check-in for -fleet.outage, then recovers; the
//     check-ins per 100 ms during the first seconds after the recovery, the peak
//     against the steady rate, and the time until every box is back are measured;
//  4. no environment has more leases than its budget (each has exactly one: the one
//     publish), every loop ends with 0 when stopped, every tick's exit code is in the
//     contract.
//
// It runs only when given a size:
//
//	go test -count=1 -v -run '^TestFleet$' -timeout 10m ./test/fleet/ -fleet.agents=500
//	go test -count=1 -v -run '^TestFleet$' -timeout 30m ./test/fleet/ -fleet.agents=1000 -fleet.interval=5s -fleet.outage=15s
//	go test -count=1 -v -run '^TestFleet$' ./test/fleet/ -fleet.agents=300 -fleet.interval=1s -fleet.outage=6s   # CI
//
// The state and deploy directories live under TMPDIR; TMPDIR=/dev/shm takes the
// disk's fsync latency out of the figures (the agent fsyncs state.json on every tick).
package fleet
