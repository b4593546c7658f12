package codes_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/monky/monky-deployd/deployd/codes"
)

func TestSentinel(t *testing.T) {
	a := codes.Unavailable.Sentinel("service unavailable")
	b := codes.Unavailable.Sentinel("service unavailable")
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

func TestOf(t *testing.T) {
	k := codes.SecretMissing.Sentinel("secret is missing")
	for _, tc := range []struct {
		name string
		kind error
		code codes.Code
	}{
		{"sentinel", k, codes.SecretMissing},
		{"wrapped", fmt.Errorf("read: %w", k), codes.SecretMissing},
		{"errors.New", errors.New("secret is missing"), ""},
		{"nil", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := codes.Of(tc.kind); got != tc.code {
				t.Errorf("Of = %q, want %q", got, tc.code)
			}
		})
	}
}

func ExampleCode_Sentinel() {
	errSealed := codes.Unavailable.Sentinel("OpenBao is sealed")
	err := fmt.Errorf("login: %w", errSealed)
	fmt.Println(errors.Is(err, errSealed), codes.Of(err))
	// Output: true UNAVAILABLE
}
