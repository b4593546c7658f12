package composecheck

import (
	"strings"

	"github.com/compose-spec/compose-go/v2/template"
)

// resolver evaluates compose interpolation strictly. It mirrors compose-go's
// template.DefaultReplacementAppliedFunc (v2.16.2) expression by expression, with one
// difference: where compose-go would silently substitute "" for an unset variable (a
// plain ${X} or $X) or fail on ${X:?msg}/${X?msg}, the resolver records the variable
// as unresolved and goes on, so that one pass finds every unresolved variable.
// Defaults and presence values are evaluated only when compose-go would evaluate them,
// with the same strictness.
type resolver struct {
	lookup     func(name string) (string, bool)
	unresolved map[string]string // recorded name -> why (a whyXxx constant); nil to discard
}

// Why a variable is unresolved, as written in the finding.
const (
	whyUnset = "is not provided by vars, secrets or a default"
	whyEmpty = "is empty but ${NAME:?} requires a value"
	// whyPassThrough: environment: [NAME], build.args, secrets.*.environment.
	whyPassThrough = "is taken from the environment but not provided by vars or secrets"
)

func (r *resolver) record(name, why string) {
	if r.unresolved == nil {
		return
	}
	if prev, ok := r.unresolved[name]; !ok || why < prev {
		r.unresolved[name] = why
	}
}

// substitute interpolates s. The only error is a *template.InvalidTemplateError for a
// malformed expression (compose-go rejects those too).
func (r *resolver) substitute(s string) (string, error) {
	return template.SubstituteWithOptions(s, r.lookup,
		template.WithReplacementFunction(r.replace),
		template.WithoutLogging)
}

// substituteFunc adapts substitute to interpolation.Options.Substitute, for the load.
func (r *resolver) substituteFunc(s string, _ template.Mapping) (string, error) {
	return r.substitute(s)
}

var operators = []string{":?", "?", ":-", "-", ":+", "+"}

// replace is a template.ReplacementFunc for one match of template.DefaultPattern.
func (r *resolver) replace(substring string, mapping template.Mapping, _ *template.Config) (string, error) {
	// compose-go picks the operator from the whole match, before cutting it at the first
	// closing brace.
	op := firstOperator(substring)

	rest := ""
	if i := firstBraceClosingIndex(substring); i > -1 {
		rest = substring[i+1:]
		substring = substring[:i+1]
	}
	pattern := template.DefaultPattern
	matches := pattern.FindStringSubmatch(substring)
	if matches == nil {
		return "", &template.InvalidTemplateError{}
	}
	groups := map[string]string{}
	for i, name := range pattern.SubexpNames() {
		if i > 0 && name != "" {
			groups[name] = matches[i]
		}
	}
	if escaped := groups["escaped"]; escaped != "" {
		return escaped, nil
	}
	braced := false
	substitution := groups["named"]
	if substitution == "" {
		substitution = groups["braced"]
		braced = true
	}
	if substitution == "" {
		return "", &template.InvalidTemplateError{}
	}

	if braced && op != "" && strings.Contains(substitution, op) {
		value, err := r.apply(op, substitution, mapping)
		if err != nil {
			return "", err
		}
		nested, err := r.substitute(rest)
		if err != nil {
			return "", err
		}
		return value + nested, nil
	}

	value, ok := mapping(substitution)
	if !ok {
		r.record(substitution, whyUnset)
	}
	return value, nil
}

// apply evaluates ${name<op>word}.
func (r *resolver) apply(op, substitution string, mapping template.Mapping) (string, error) {
	name, word, _ := strings.Cut(substitution, op)
	value, ok := mapping(name)
	colon := strings.HasPrefix(op, ":")
	switch strings.TrimPrefix(op, ":") {
	case "?":
		if !ok || (colon && value == "") {
			// compose-go fails the load here; the variable is unresolved. Like compose-go,
			// interpolate the message first: a malformed one is a syntax error.
			if _, err := (&resolver{lookup: r.lookup}).substitute(word); err != nil {
				return "", err
			}
			if ok {
				r.record(name, whyEmpty)
			} else {
				r.record(name, whyUnset)
			}
			return "", nil
		}
		return value, nil
	case "-":
		if !ok || (colon && value == "") {
			return r.substitute(word)
		}
		return value, nil
	default: // "+"
		if ok && (!colon || value != "") {
			return r.substitute(word)
		}
		return value, nil
	}
}

// firstOperator returns the operator compose-go applies to a braced expression: the
// one that occurs first in the match, or "" when there is none.
func firstOperator(s string) string {
	best, bestIdx := "", -1
	for _, op := range operators {
		if i := strings.Index(s, op); i >= 0 && (bestIdx < 0 || i < bestIdx) {
			best, bestIdx = op, i
		}
	}
	return best
}

// firstBraceClosingIndex is compose-go's getFirstBraceClosingIndex (unexported there).
func firstBraceClosingIndex(s string) int {
	open := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '}' {
			open--
			if open == 0 {
				return i
			}
		}
		if s[i] == '{' {
			open++
			i++
		}
	}
	return -1
}
