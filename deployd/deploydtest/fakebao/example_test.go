package fakebao_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/hashicorp/vault/api"

	"github.com/monky/monky-deployd/deployd/deploydtest/fakebao"
)

// A test seeds a secret with the root token through the real vault/api client, logs
// in with a minted grant and reads the secret back; another env's path is denied.
// (The example assumes no VAULT_* variable is set: vault/api reads them.)
func Example() {
	ctx := context.Background()
	s := fakebao.New(fakebao.Options{})
	defer s.Close()

	admin, _ := api.NewClient(&api.Config{Address: s.URL(), HttpClient: &http.Client{}})
	admin.SetToken(s.RootToken())
	if _, err := admin.KVv2("secret").Put(ctx, "envs/env-dev-01/db", map[string]any{"password": "pw"}); err != nil {
		fmt.Println(err)
		return
	}

	c, _ := api.NewClient(&api.Config{Address: s.URL(), HttpClient: &http.Client{}})
	c.ClearToken()
	login, err := c.Logical().Write("auth/jwt-tenancy/login",
		map[string]any{"role": "see-env", "jwt": s.MintGrant("env-dev-01")})
	if err != nil {
		fmt.Println(err)
		return
	}
	c.SetToken(login.Auth.ClientToken)
	env, _ := s.TokenEnv(login.Auth.ClientToken)
	fmt.Println("token of", env, "policies", login.Auth.Policies)

	kv, err := c.KVv2("secret").Get(ctx, "envs/env-dev-01/db")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("version", kv.VersionMetadata.Version, "has", len(kv.Data), "key")

	_, err = c.KVv2("secret").Get(ctx, "envs/env-dev-02/db")
	var rerr *api.ResponseError
	if errors.As(err, &rerr) {
		fmt.Println("env-dev-02:", rerr.StatusCode)
	}
	for _, r := range s.Requests() {
		fmt.Println(r.Method, r.Path, r.Status)
	}
	// Output:
	// token of env-dev-01 policies [default see-env]
	// version 1 has 1 key
	// env-dev-02: 403
	// PUT /v1/secret/data/envs/env-dev-01/db 200
	// PUT /v1/auth/jwt-tenancy/login 200
	// GET /v1/secret/data/envs/env-dev-01/db 200
	// GET /v1/secret/data/envs/env-dev-02/db 403
}
