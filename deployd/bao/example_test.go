package bao_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/monky/monky-deployd/deployd/bao"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakebao"
	"github.com/monky/monky-deployd/deployd/secret"
)

// A box logs in with its deploy grant, reads the secrets its bundle references and
// revokes the token it no longer needs.
func Example() {
	ctx := context.Background()
	fake := fakebao.New(fakebao.Options{})
	defer fake.Close()
	fake.PutSecret("env-dev-01", "db", map[string]string{"password": "s3cr3t", "user": "app"})

	c, err := bao.New(bao.Config{Addr: fake.URL(), EnvID: "env-dev-01"})
	if err != nil {
		fmt.Println(err)
		return
	}
	tok, err := c.Login(ctx, secret.New(fake.MintGrant("env-dev-01")))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("token of", tok.EnvID, "valid for", tok.TTL, "policies", tok.Policies)

	vals, err := c.Read(ctx, tok.Token, map[string]bao.Ref{
		"DB_PASSWORD": {Path: "db", Key: "password"},
		"DB_USER":     {Path: "db", Key: "user"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("DB_PASSWORD prints as", vals["DB_PASSWORD"], "and is", len(vals["DB_PASSWORD"].Reveal()), "bytes long")

	if err := c.RevokeSelf(ctx, tok.Token); err != nil {
		fmt.Println(err)
	}
	_, err = c.LookupSelf(ctx, tok.Token)
	fmt.Println("after revoke-self:", errors.Is(err, bao.ErrUnauthenticated))
	// Output:
	// token of env-dev-01 valid for 1h0m0s policies [default see-env]
	// DB_PASSWORD prints as [REDACTED] and is 6 bytes long
	// after revoke-self: true
}

// Token upkeep on every tick: look the token up and renew it when less than a third
// of its creation TTL is left.
func ExampleTokenInfo_NeedsRenew() {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	fake := fakebao.New(fakebao.Options{Now: clock})
	defer fake.Close()
	c, _ := bao.New(bao.Config{Addr: fake.URL(), EnvID: "env-dev-01"})
	tok, _ := c.Login(ctx, secret.New(fake.MintGrant("env-dev-01")))

	for _, elapsed := range []time.Duration{10 * time.Minute, 45 * time.Minute} {
		now = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC).Add(elapsed)
		info, err := c.LookupSelf(ctx, tok.Token)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("after %v: %v left, renew: %v\n", elapsed, info.TTL, info.NeedsRenew(now))
		if info.NeedsRenew(now) {
			renewed, err := c.RenewSelf(ctx, tok.Token)
			if err != nil {
				fmt.Println(err)
				return
			}
			fmt.Println("renewed for", renewed.TTL)
		}
	}
	// Output:
	// after 10m0s: 50m0s left, renew: false
	// after 45m0s: 15m0s left, renew: true
	// renewed for 1h0m0s
}

// Errors carry a stable code and name the variable and the path, never a value.
func ExampleClient_Read_errors() {
	ctx := context.Background()
	fake := fakebao.New(fakebao.Options{})
	defer fake.Close()
	fake.PutSecret("env-dev-01", "db", map[string]string{"password": "s3cr3t"})
	fake.DeleteSecret("env-dev-01", "db")

	c, _ := bao.New(bao.Config{Addr: fake.URL(), EnvID: "env-dev-01"})
	tok, _ := c.Login(ctx, secret.New(fake.MintGrant("env-dev-01")))

	for _, ref := range []bao.Ref{{Path: "db", Key: "password"}, {Path: "../env-dev-02/db", Key: "password"}} {
		_, err := c.Read(ctx, tok.Token, map[string]bao.Ref{"DB_PASSWORD": ref})
		var be *bao.Error
		if errors.As(err, &be) {
			fmt.Println(be.Code())
			fmt.Println(" ", err)
		}
	}
	fake.SetSealed(true)
	_, err := c.LookupSelf(ctx, tok.Token)
	var sealed *bao.Error
	errors.As(err, &sealed)
	fmt.Println("sealed:", sealed.Code(), errors.Is(err, bao.ErrUnavailable))
	// Output:
	// SECRET_MISSING
	//   bao read secret/data/envs/env-dev-01/db (variable DB_PASSWORD): SECRET_MISSING: version 1 of the secret was deleted (HTTP 404)
	// SECRET_PATH
	//   bao read (variable DB_PASSWORD): SECRET_PATH: secret path "../env-dev-02/db": has a ".." segment
	// sealed: UNAVAILABLE true
}

// SecretPath pins every reference to the env's root.
func ExampleSecretPath() {
	for _, p := range []string{"db", "stripe/api", "../env-dev-02/db", "/etc/passwd"} {
		path, err := bao.SecretPath("secret", "env-dev-01", p)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(path)
	}
	// Output:
	// secret/data/envs/env-dev-01/db
	// secret/data/envs/env-dev-01/stripe/api
	// bao secret-path: SECRET_PATH: secret path "../env-dev-02/db": has a ".." segment
	// bao secret-path: SECRET_PATH: secret path "/etc/passwd": starts with /
}
