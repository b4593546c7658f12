// Package fakedockertest puts the fake docker program on a test's PATH: Install builds
// cmd/fake-docker once per test process, writes the test's script and returns where
// the program, its record and its state live. It is a separate package so that the
// fake docker binary itself never links the testing package.
package fakedockertest
