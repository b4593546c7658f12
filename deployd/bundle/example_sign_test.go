package bundle_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/monky/monky-deployd/deployd/bundle"
)

// ExamplePack packs a rendered directory, signs the bundle as the renderer does, and
// checks the signature as a box that trusts the renderer's key does before its lease.
func ExamplePack() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "rendered-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = os.RemoveAll(dir) }()
	_ = os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte("services:\n  web:\n    image: nginx:1.27\n"), 0o644)

	// The renderer: pack (files nil: every file of the directory), then sign.
	var b bytes.Buffer
	res, err := bundle.Pack(ctx, &b, dir, bundle.Manifest{
		Schema: 1, EnvID: "env-dev-01", Serial: 4, ComposeFiles: []string{"compose.yaml"},
	}, bundle.PackOptions{Gzip: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize)) // keygen's, in real life
	expires := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	sig, err := bundle.Sign(key, res.Statement(), bundle.SignOptions{Expires: expires})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("sha:", res.SHA)

	// The box: its trusted keys come from its config, in their text form.
	pub, _ := bundle.NewPublicKey(key.Public().(ed25519.PublicKey))
	keys, err := bundle.ParseKeyRing([]string{pub.String()})
	if err != nil {
		fmt.Println(err)
		return
	}
	now := time.Date(2029, 6, 1, 12, 0, 0, 0, time.UTC)
	want := bundle.Statement{SHA: res.SHA, EnvID: "env-dev-01", Serial: 4}
	id, err := bundle.CheckSignature(sig, keys, want, now)
	fmt.Println("signed by:", id, "error:", err)

	// The same signature on a box of another env, and after its expiry.
	want.EnvID = "env-dev-02"
	_, err = bundle.CheckSignature(sig, keys, want, now)
	fmt.Println(err)
	_, err = bundle.CheckSignature(sig, keys, res.Statement(), expires.Add(time.Hour))
	fmt.Println(errors.Is(err, bundle.ErrSignatureExpired))
	// Output:
	// sha: 7a0414d54c6ffe28181935d96948f6e19995ceade7c2435b410aaa51dcfef74b
	// signed by: fe812c12f3ab4ce6 error: <nil>
	// signature refused: SIGNATURE_INVALID: a signature of another bundle: signed for env_id env-dev-01, this box is env-dev-02
	// true
}
