//go:build tools

// Package tools pins docker compose v2, built by build.sh into the docker CLI
// plugin that the real-engine tests (test/engine) and CI use.
package tools

import _ "github.com/docker/compose/v2/cmd"
