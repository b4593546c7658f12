package main

import (
	"encoding/json"
	"strings"

	"github.com/monky/monky-deployd/deployd"
)

// status prints the box's status (deployd.StatusOf: no network) as text or JSON and
// exits with its verdict's code: 0 ok, 1 warning, 2 critical, 3 unknown, the codes of
// a monitoring plugin (docs/OPERATIONS.md, "Watching a box"); a usage error exits 2
// too. A config or a state that cannot be read is an unknown status that says why, in
// JSON too.
func (c *cli) status(args []string) int {
	fs := c.flags("status")
	configPath := fs.String("config", deployd.DefaultConfigPath, "config file")
	asJSON := fs.Bool("json", false, "print the status as JSON (schema 2)")
	if code, ok := c.parse(fs, args, 0); !ok {
		return code
	}
	v, err := deployd.StatusOf(*configPath, deployd.StatusOptions{Secrets: c.red})
	if err != nil {
		c.log.Error("the config is invalid; fix it and run again", "config", *configPath, "code", deployd.CodeOf(err), "err", err)
	}
	var buf strings.Builder
	if *asJSON {
		data, _ := json.MarshalIndent(v, "", "  ")
		buf.Write(data)
		buf.WriteByte('\n')
	} else {
		buf.WriteString(v.Text())
	}
	if code := c.output(c.red.Redact(buf.String())); code != 0 {
		return code
	}
	return v.Verdict.Exit()
}
