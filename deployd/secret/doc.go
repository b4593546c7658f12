// Package secret holds the two tools monky-deployd uses to keep secret values out of
// every output: Value, a string that prints as a mask on every print path, and
// Redactor, which learns every secret value the moment it exists and removes them from
// log records, error texts, report tails and files the agent writes.
//
// Tokens, grants and values read from OpenBao are carried as Value; the raw string is
// reachable only through Reveal, at the one place where it is sent.
package secret
