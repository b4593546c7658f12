// Command monky-fakes runs monky-deployd's fake tenancy, fake OpenBao and their admin
// API on loopback, for test suites in any language (docs/FAKES.md).
//
// It prints one JSON line on stdout,
//
//	{"tenancy_url":"http://127.0.0.1:…","bao_addr":"http://127.0.0.1:…","admin_url":"http://127.0.0.1:…"}
//
// and serves until stdin closes (so a parent that dies takes it along), or until
// SIGTERM or SIGINT. With -watch-stdin=false only a signal stops it. Logs go to stderr.
package main
