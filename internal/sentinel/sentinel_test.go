package sentinel

import (
	"errors"
	"fmt"
	"testing"

	"github.com/monky/monky-deployd/deployd/codes"
)

func TestNew(t *testing.T) {
	a := New(codes.Unavailable, "service unavailable")
	b := New(codes.Unavailable, "service unavailable")
	if a.Error() != "service unavailable" {
		t.Errorf("Error() = %q", a.Error())
	}
	if !errors.Is(a, a) || errors.Is(a, b) || errors.Is(b, a) {
		t.Error("sentinels must compare by identity, as errors.New's do")
	}
	var coded interface{ Code() codes.Code }
	if !errors.As(fmt.Errorf("tick: %w", a), &coded) || coded.Code() != codes.Unavailable {
		t.Error("a wrapped sentinel must be found by errors.As with a Code method")
	}
}

func TestCodeOf(t *testing.T) {
	k := New(codes.SecretMissing, "secret is missing")
	for _, tc := range []struct {
		name string
		kind error
		code codes.Code
		ok   bool
	}{
		{"sentinel", k, codes.SecretMissing, true},
		{"wrapped", fmt.Errorf("read: %w", k), codes.SecretMissing, true},
		{"errors.New", errors.New("secret is missing"), "", false},
		{"nil", nil, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, ok := CodeOf(tc.kind)
			if code != tc.code || ok != tc.ok {
				t.Errorf("CodeOf = %q, %v; want %q, %v", code, ok, tc.code, tc.ok)
			}
		})
	}
}
