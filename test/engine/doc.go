// Package engine holds the real-engine tests of monky-deployd: one table of
// scenarios (apply, idle, restore, missing image, registry down, images pulled before
// the lease, removed service, one-shots,
// depends_on, crash loop, down and purge, SIGKILL during up, pruning, live health
// after a container dies, removal of the images of pruned releases, the secret
// canary) run through the real binary against the fake docker and against a real
// docker engine with compose v2, with the same assertions, so that every difference
// between the fake and the engine shows up as a failure of the fake.
//
// The engine half runs with MONKY_ENGINE=1 (CI sets it and fails when it cannot run):
//
//	sudo bash test/engine/dockerd.sh start   # docker.io and docker-registry
//	sudo bash tools/compose/build.sh --install
//	MONKY_ENGINE=1 go test -v ./test/engine/
//
// Without it the engine half skips with that command. The images are built here from
// testapp (a static Go program, `docker import`ed): nothing is pulled from the network; the
// pull scenarios push it to a docker-registry of their own on a loopback port. Every
// container, volume and network belongs to a project named monky-e2e-<random>, removed
// when its test ends.
package engine
