package bundle_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/monky/monky-deployd/deployd/bundle"
)

// check verifies the bundle file at path as the box env-dev-01 would: it prints the
// bundle's sha, services and warnings, or each refusal's code and detail.
func check(ctx context.Context, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	res, err := bundle.Verify(ctx, f, bundle.Expect{EnvID: "env-dev-01"})
	var refused *bundle.RefusedError
	if errors.As(err, &refused) {
		for _, r := range refused.Refusals {
			fmt.Println(r.Code, r.Detail)
		}
		return err
	}
	if err != nil {
		return err
	}
	fmt.Println("accepted", res.SHA, "services", res.Services, "warnings", res.Warnings)
	return nil
}

// Example_check is the README's "Check a bundle from Go": check, which the README
// quotes, on a bundle that is accepted and on one whose service web is privileged
// (packaging/readme_test.go keeps the README's code and output the same as here).
func Example_check() {
	dir, err := os.MkdirTemp("", "check-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	privileged := strings.Replace(tinyCompose, "    image: nginx:1.27\n", "    image: nginx:1.27\n    privileged: true\n", 1)
	for _, b := range []struct{ name, compose string }{{"good.tar", tinyCompose}, {"privileged.tar", privileged}} {
		path := filepath.Join(dir, b.name)
		data, _ := io.ReadAll(tinyWith("env-dev-01", b.compose))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			fmt.Println(err)
			return
		}
		var refused *bundle.RefusedError
		if err := check(context.Background(), path); err != nil && !errors.As(err, &refused) {
			fmt.Println(err) // not a refusal, which check printed
		}
	}
	// Output:
	// accepted 01569d22789bb4be560d539c5e0ab30a1a392da8c044cbdf32000143c2579818 services [web] warnings []
	// PRIVILEGED service web: privileged is true
}
