package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/testbox"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// TestBinaryPlan drives `monky-deployd plan` of the shipped binary on the fakes:
// exit 2 with every service added, 0 for the live bundle, 2 with the reason of an
// image change and of a var's value (named, never shown), 1 for a refused bundle, 75
// with tenancy gone. (That a plan takes no lease and reports nothing, refused or not:
// deployd's TestPlan.)
func TestBinaryPlan(t *testing.T) {
	testprog.SkipIfShort(t)
	b := newBox(t, boxOpts{})
	plan := func(code int, extra ...string) result { // plan, which must exit with code
		return b.runExit(code, append([]string{"plan", "--config", b.CfgPath}, extra...))
	}
	b.runExit(0, []string{"bootstrap", "--config", b.CfgPath})

	b.Publish(faketenancy.SampleApp(b.Env, 1))
	res := plan(2)
	assert.Contains(t, res.Stdout, "+ web")
	assert.Contains(t, res.Stdout, "summary: 2 added")

	b.tickExit(0)
	res = plan(0, "--json")
	var p deployd.Plan
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &p))
	assert.Equal(t, 1, p.Schema)
	assert.False(t, p.Changes)
	assert.Contains(t, res.Stdout, `"schema":1`)

	spec := faketenancy.SampleApp(b.Env, 2)
	spec.Files["compose.yaml"] = strings.Replace(spec.Files["compose.yaml"], "busybox:1.36", "busybox:1.37", 1)
	spec.Vars["LOG_LEVEL"] = "verbose-3141"
	b.Publish(spec)
	res = plan(2)
	assert.Contains(t, res.Stdout, "~ migrate  recreated: image changed")
	assert.Contains(t, res.Stdout, "LOG_LEVEL changed")
	for _, v := range []string{"verbose-3141", "info", testbox.DefaultSecret} {
		assert.NotContains(t, res.Stdout, v)
		assert.NotContains(t, res.Stderr, v)
	}

	bad := faketenancy.SampleApp(b.Env, 3)
	bad.Files["compose.yaml"] += "  evil:\n    image: busybox:1.36\n    privileged: true\n"
	b.Publish(bad)
	res = plan(1, "--json")
	assert.Contains(t, res.Stdout, `"code":"PRIVILEGED"`)

	b.Stack.Tenancy.Close()
	res = plan(75)
	assert.Empty(t, res.Stdout)
}
