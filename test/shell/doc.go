// Package shell runs scenario.sh, a box's whole life driven from a shell script with
// the shipped binaries alone (monky-fakes, fake-docker and its serve-engine, the agent
// binary; no Go code in the scenario), as a suite in any language drives them
// (docs/FAKES.md, "A whole apply from a shell"). TestScenario runs it without -short
// (CI also runs it as a step of its own: bash test/shell/scenario.sh); the script's
// syntax and shellcheck are checked always.
package shell
