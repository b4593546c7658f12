// Package metrics writes the agent's outcome as a Prometheus text-format file for
// node_exporter's textfile collector.
//
// After every tick the agent hands a Snapshot to Write, which renders it (Format) and
// replaces the file atomically, so the collector never reads half a file. Every metric
// name starts with the agent's name (Prefix). The file carries names, stable codes and numbers
// only: Format validates each string field against a narrow pattern (env_id, version,
// result, code, sha) and refuses anything else, so a secret value can never reach a
// label by mistake, and its errors name the field, never the value.
//
// Decisions an operator relies on:
//
//   - The file is written with mode 0644: node_exporter runs as its own user and must
//     read it. It holds nothing secret.
//   - A time that never happened (no check-in yet) is written as 0, the Prometheus
//     convention for "never"; alert on the age of the last_checkin_timestamp_seconds metric.
//   - The last_result metric always has exactly one series, {result="",code=""} before
//     the first report, so absent() alerts do not fire on a fresh box.
//   - monky_deployd_token_ttl_seconds is 0 when the agent holds no token.
//
// Write takes no context: it is one small local write (temp file, fsync, rename, fsync
// of the directory) that cannot be cancelled half-way without leaving a stray temp file.
package metrics
