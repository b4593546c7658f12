// Package deployd is the core of monky-deployd, the on-box pull agent for Monky backend
// environments on docker VMs and laptops (MONKY-ADR-0028).
//
// An Agent, built from a Config, runs one tick at a time: it checks in with
// monky-tenancy (the check-in is the heartbeat), verifies a published bundle completely
// before it asks for a deploy lease, logs into OpenBao with the lease's grant, reads the
// environment's secrets, stages and promotes a release, runs docker compose, waits for
// health and reports. The outcome of a tick maps onto the exit codes the systemd timer
// understands: 0, 75 (temporary), 78 (AGENT_ENV_MISMATCH, never retried) and 1.
package deployd
