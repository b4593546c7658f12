// Package logging builds the agent's log/slog handler and routes the process-global
// logrus logger (through which compose-go and the OpenZiti SDK log) into it.
//
// NewHandler writes one line per record, as logfmt text or as JSON. Under systemd
// (cmd/monky-deployd sets Options.Journal when JOURNAL_STREAM is set; this package reads
// no environment variables) each line starts with its sd-daemon(3) priority, "<7>" debug,
// "<6>" info, "<4>" warn, "<3>" error, and carries no timestamp, because the journal
// stamps every line itself. The "level" attribute is kept so that the text stays
// greppable outside journalctl's priority filter.
//
// RouteLogrus turns every logrus entry into one slog record, so that library output
// passes through the agent's handler (and the secret.Redactor wrapped around it) and
// never reaches raw stderr.
//
// The usual wiring in cmd/:
//
//	red := secret.NewRedactor()
//	h := logging.NewHandler(os.Stderr, logging.Options{Level: level, Journal: os.Getenv("JOURNAL_STREAM") != ""})
//	logger := slog.New(red.Handler(h))
//	logging.RouteLogrus(logrus.StandardLogger(), logger)
package logging
