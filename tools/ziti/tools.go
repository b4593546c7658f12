//go:build tools

// Package tools pins the OpenZiti CLI (github.com/openziti/ziti) that the
// real-mesh tests of monky-deployd run. It is never imported; build.sh builds
// the pinned CLI into bin/ziti.
package tools

import _ "github.com/openziti/ziti/ziti"
