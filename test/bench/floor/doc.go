// Command floor is the floor of the idle-tick benchmark: the least a process can do
// for a heartbeat. It reads a bearer from a file, sends one HTTP POST of a
// check-in-sized JSON body to a URL and exits 0 when the answer is 200, 1 otherwise
// (2 on a usage error). It uses nothing but the standard library, so its cost is the
// process start of a small Go program plus one loopback request: what any agent has to
// pay to check in once.
//
//	floor -url http://127.0.0.1:PORT/v1/agent/checkin -token-file PATH -env ENV
//
// The benchmarks of package bench (test/bench) build it once and run it as a whole
// process, next to monky-deployd's `run`, to compute the ratio in docs/BENCHMARKS.md.
package main
