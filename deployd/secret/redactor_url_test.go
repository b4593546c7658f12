package secret

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A password that reaches a container's log inside a DSN is percent-encoded as URL
// user info (Go's url.URL.String, libpq, SQLAlchemy) or with every reserved byte
// escaped (Python's quote(v, safe=""), JavaScript's encodeURIComponent), and the hex
// digits may be lowercase. The failing container's log is part of the report's tail.
func TestRedactURLUserInfoForms(t *testing.T) {
	const pw = "p@ss/w:rd#1 x+y"
	r := NewRedactor()
	r.Add(pw)
	dsn := (&url.URL{Scheme: "postgres", User: url.UserPassword("app", pw), Host: "db:5432", Path: "/app"}).String()
	for _, text := range []string{
		dsn,
		"connecting to postgres://app:p%40ss%2Fw%3Ard%231%20x%2By@db failed",   // quote(safe=""), encodeURIComponent
		"connecting to postgres://app:p%40ss%2fw%3ard%231%20x%2by@db failed",   // lowercase hex
		"connecting to postgres://app:p%40ss%2Fw%3Ard%231%20x%2By@db failed\n", // in a line
	} {
		got := r.Redact(text)
		assert.NotContains(t, got, "ss", "%s -> %s", text, got)
		assert.True(t, strings.Contains(got, Mask), got)
	}
}
