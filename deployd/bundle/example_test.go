package bundle_test

import (
	"archive/tar"
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

const tinyCompose = "services:\n  web:\n    image: nginx:1.27\n    environment:\n      LOG_LEVEL: ${LOG_LEVEL}\n      DB_PASSWORD: ${DB_PASSWORD}\n"

// tiny builds a bundle in memory: a manifest, a compose file and a config file.
func tiny(envID string) *bytes.Reader { return tinyWith(envID, tinyCompose) }

func tinyWith(envID, compose string) *bytes.Reader {
	manifest := `{"schema":1,"env_id":"` + envID + `","serial":3,` +
		`"compose_files":["compose.yaml"],"files":["compose.yaml","app.toml"],` +
		`"vars":{"LOG_LEVEL":"info"},"secrets":{"DB_PASSWORD":{"path":"db","key":"password"}}}`
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range [][2]string{{"manifest.json", manifest}, {"compose.yaml", compose}, {"app.toml", "port = 8080\n"}} {
		_ = tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o644, Size: int64(len(f[1]))})
		_, _ = tw.Write([]byte(f[1]))
	}
	_ = tw.Close()
	return bytes.NewReader(b.Bytes())
}

func ExampleVerify() {
	res, err := bundle.Verify(context.Background(), tiny("env-dev-01"), bundle.Expect{EnvID: "env-dev-01"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("serial:", res.Manifest.Serial)
	fmt.Println("services:", res.Services)
	fmt.Println("files:", res.Files)
	// Output:
	// serial: 3
	// services: [web]
	// files: 3
}

func ExampleVerify_refused() {
	_, err := bundle.Verify(context.Background(), tiny("env-dev-01"), bundle.Expect{
		EnvID:      "env-dev-02",
		LiveSerial: 4,
	})
	var refused *bundle.RefusedError
	if errors.As(err, &refused) {
		for _, r := range refused.Refusals {
			fmt.Println(r.Code, "-", r.Detail)
		}
	}
	// Output:
	// ENV_MISMATCH - manifest.json: env_id is env-dev-01, this box is env-dev-02
	// ROLLBACK - manifest.json: serial 3 is lower than the live release's 4 and the check-in did not ask for a rollback
}

func ExampleSHA() {
	sha, err := bundle.SHA(context.Background(), tiny("env-dev-01"), bundle.Limits{})
	if err != nil {
		fmt.Println(err)
		return
	}
	// The same as, in the unpacked directory:
	// find . -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum
	fmt.Println(sha)
	// Output:
	// 01569d22789bb4be560d539c5e0ab30a1a392da8c044cbdf32000143c2579818
}

func ExampleRenderEnv() {
	env, err := bundle.RenderEnv(map[string]string{"LOG_LEVEL": "info", "GREETING": "hello world"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(env))
	// Output:
	// GREETING='hello world'
	// LOG_LEVEL='info'
}

func ExampleReadStaged() {
	ctx := context.Background()
	res, err := bundle.Verify(ctx, tiny("env-dev-01"), bundle.Expect{EnvID: "env-dev-01"})
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, err := os.MkdirTemp("", "release-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := bundle.Extract(ctx, tiny("env-dev-01"), dir, res.SHA, bundle.Limits{}); err != nil {
		fmt.Println(err)
		return
	}
	// Later, without the bundle: what does the staged release run?
	staged, err := bundle.ReadStaged(ctx, dir, bundle.Expect{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("serial:", staged.Manifest.Serial, "services:", staged.Services)
	// Output:
	// serial: 3 services: [web]
}

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
