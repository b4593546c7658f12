// Package zitimesh proves monky-deployd's sdk transport on a real OpenZiti network.
//
// Its tests start `ziti edge quickstart` (a controller and an edge router in one
// process) on free loopback ports in a temporary home, create and enroll an identity for
// the tenancy host and one for each box, create the tenancy service with its Bind and
// Dial service policies, host the fake tenancy (deployd/deploydtest/faketenancy) on the
// service through the SDK's Listen with TLS for tenancy.monky.internal on top, and then
// run the real agent binary (cmd/monky-deployd, built by the test) with
// `transport: sdk` against it. The fake OpenBao stays on plain loopback HTTP and the
// fake docker (cmd/fake-docker) is the compose.docker program.
//
// # Running
//
// The tests need the pinned ziti CLI, which the separate tools module builds:
//
//	bash tools/ziti/build.sh
//	ZITI_BIN=$PWD/tools/ziti/bin/ziti go test -count=1 -v ./test/ziti/...
//
// Without ZITI_BIN the tests look for tools/ziti/bin/ziti and skip, saying how to build
// it, when it is not there. When ZITI_BIN is set and does not name an executable the
// tests fail instead of skipping, so that a CI job that meant to run them cannot pass
// without them. The measurements are benchmarks:
//
//	ZITI_BIN=$PWD/tools/ziti/bin/ziti go test -run '^$' -bench . -benchtime 20x ./test/ziti/...
//
// TestLoopOverTheMesh and TestLoopLegacySessionDeleted measure `run --loop` (one
// OpenZiti context for the process): they restart the quickstart on its home with
// controller events written to a file, count the box's authentications from the
// controller's apiSession events, and stop, restart and reconfigure the controller
// under the running loop. They run in parallel with each other. The steady phase of
// the first lasts -mesh.loop (default: 20 check-ins) with API sessions of -mesh.token
// (default 1m, the controller's minimum); docs/BENCHMARKS.md, "The loop over the mesh".
//
// # Decisions
//
//   - Ports: the controller (edge API and control plane share one port) and the router
//     get ports that were free on 127.0.0.1 a moment before; the controller binds
//     127.0.0.1 only. The quickstart's router config binds its edge listener on
//     0.0.0.0 (fixed in ziti's template); nothing here talks to it but over loopback.
//   - The CLI runs with HOME inside the temporary home, so `ziti edge login` never
//     writes the developer's ~/.config/ziti, and with an environment holding nothing
//     but PATH, HOME and the quickstart's own ZITI_* settings.
//   - "A stopped controller" is the quickstart process killed: controller and router
//     go together, as they would when the box's only controller address is down. The
//     test that stops it runs last on its mesh. "A frozen controller" is the same
//     process stopped with SIGSTOP (it accepts connections and never answers) and
//     resumed with SIGCONT after one tick.
//   - TLS runs end to end inside the OpenZiti connection, as in production: the test
//     makes a CA, the tenancy host serves a certificate for tenancy.monky.internal and
//     the box trusts the CA through tenancy.ca_file.
package zitimesh
