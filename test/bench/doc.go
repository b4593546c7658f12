// Package bench measures monky-deployd against floors: each figure is a ratio to the
// least the same job could cost on the same machine at the same moment, so that it
// holds on a noisy, shared machine and can be compared across commits with benchstat.
// The package has no code of its own besides this comment: the benchmarks are in its
// _test.go files and the floor program in test/bench/floor. docs/BENCHMARKS.md has the
// figures and the commands.
//
// # Benchmarks
//
//   - BenchmarkIdleTick runs `monky-deployd run --config …` (built once with the
//     flags of packaging/build-deb.sh), what the timer runs,
//     as a whole process against the loopback fakes, with the desired action none, and
//     next to each run (timer stopped) the floor program, which sends one
//     check-in-sized POST with a bearer to the fake tenancy. It reports the tick's
//     ns/op, floor-ns/op and x-floor (the ratio). BenchmarkIdleTickLive does the same on
//     a box with a live release (the check-in carries its health).
//     BenchmarkIdleTickFloor is the floor alone.
//   - BenchmarkIdleTickNoSystemRoots is BenchmarkIdleTick with SSL_CERT_FILE and
//     SSL_CERT_DIR pointing at nothing: the price of loading the system roots.
//   - BenchmarkStartup runs `monky-deployd version` the same way: the process start
//     and package initialisation of the agent binary, which every timer tick pays.
//   - BenchmarkDockerVersion is the `docker version` subprocess a timer tick runs.
//   - BenchmarkIdleTickCold is LoadConfig, deployd.New, one tick and Close in the
//     benchmark process: `run` without the process start.
//   - BenchmarkIdleTickInProcess calls Agent.Tick (action none) in the benchmark
//     process, against one POST with a keep-alive client as floor.
//   - BenchmarkApply50 applies a new serial of a 50-service bundle
//     (faketenancy.SampleServices) per iteration with the fake docker, and reports
//     the split of the tick taken from the agent's own log lines. Its floor is the
//     work no apply can skip:
//     bundle.Verify and bundle.Extract of the same bundle, then one `docker compose up`
//     and one `docker compose ps` of the fake docker.
//
// # Decisions
//
//   - Ratios are measured interleaved (one floor run next to each agent run, after it
//     and before it in turn), so that a
//     burst of load hits both sides alike, and x-floor is the median of the per-pair
//     ratios, so that a burst that hit one side only does not move it. The floor runs
//     with the benchmark timer stopped, so ns/op stays the agent's own figure.
//   - Whole-process benchmarks also report CPU time (user and system, of the process
//     and the children it waited for, such as `docker version`): cpu-ns/op,
//     floor-cpu-ns/op and x-floor-cpu. CPU time hardly depends on the load of the
//     machine, so x-floor-cpu is the steadiest figure to compare commits with.
//   - Every run is checked: a process must exit 0, a tick must answer the expected
//     action and result, and the fake tenancy must have counted one check-in per run.
//     A benchmark that measured failures would be worse than none.
//   - Child processes get an explicit environment (the fake docker's PATH and
//     FAKE_DOCKER_* only); the agent passes compose only PATH and the docker CLI's
//     variables, and the fake docker reads its paths from fake-docker.json.
package bench
