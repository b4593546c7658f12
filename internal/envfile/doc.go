// Package envfile renders the .env file of a release so that compose-go's own dotenv
// parser (github.com/compose-spec/compose-go/v2/dotenv, the parser `docker compose`
// uses for a project's .env) reads back exactly the map that was rendered.
//
// The format is one `NAME=value` line per variable, sorted by name. Names must match
// ^[A-Za-z_][A-Za-z0-9_]*$. Values are quoted as follows (checked against the dotenv
// parser of compose-go v2.16.2):
//
//   - Single quotes when the value holds no single quote, no backslash and no control
//     character (code points below U+0020, and DEL). Inside single quotes dotenv does no
//     interpolation and no escape processing, so `$`, `${X}`, `$$`, `#`, `=`, spaces and
//     any printable Unicode are read literally.
//   - Double quotes otherwise. Inside double quotes dotenv expands the escapes \\ \" \$
//     \n \r \t \a \b \f \v and then interpolates `$` expressions, so every backslash,
//     double quote and dollar is escaped (`\$` reads back as a literal `$`, never as an
//     interpolation) and newlines, carriage returns and tabs are written as escapes, so
//     that every variable stays on one line.
//
// A value holding a NUL byte cannot reach a process environment and is refused. As a
// last guard, Render parses every line it writes with compose-go's parser and refuses a
// value that would not read back exactly. Errors name the variable, never the value.
package envfile
