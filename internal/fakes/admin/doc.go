// Package admin is the HTTP admin API over a fake tenancy and a fake OpenBao wired
// together, for test suites in any language (cmd/monky-fakes serves it; docs/FAKES.md
// documents it). Every answer is JSON; an error is {"error":"…"} with a 4xx status.
//
//	POST   /envs/{env}/bundles            body: bundle bytes → {"sha","serial"}; desired = apply
//	PUT    /envs/{env}/bundles/{sha}/signature  body: signature file → 204 (404: sha not published for env)
//	PUT    /envs/{env}/desired            {"action","sha","serial","purge","retry","rollback","override_hold"} → 204
//	POST   /envs/{env}/grants             → {"grant"}: a bootstrap grant (supersedes older ones)
//	POST   /envs/{env}/tokens             → {"token"}: a live OpenBao token of env (login with a fresh grant)
//	DELETE /envs/{env}/tokens             → 204: every token of env revoked
//	PUT    /envs/{env}/secrets/{path...}  {"key":"value",…} → {"version"}
//	DELETE /envs/{env}/secrets/{path...}  → 204: soft delete (?destroy=true destroys)
//	GET    /envs/{env}/reports            → [report, …]
//	GET    /envs/{env}/reports/{n}        → the n-th report, waiting up to ?timeout= (default 30s; 504 after)
//	GET    /envs/{env}/checkins           → [check-in, …], each with its "live" object if it carried one
//	GET    /envs/{env}/live               → the latest check-in's live object; 404 when it carried none
//	GET    /envs/{env}/deferred           → the latest check-in's deferred object; 404 when it carried none
//	GET    /envs/{env}/leases             → [lease, …]
//	GET    /requests                      → [{"service","method","path","env_id","status","time"}, …]
//	GET    /faults, PUT /faults           the Faults document below (PUT replaces all of it)
//
// Faults:
//
//	{"lease_shape": "" | "approle" | "wrapped",
//	 "lease_budget": 0,                   // > 0 overrides the budget per env and window
//	 "status": {"checkin": 503, …},       // forced tenancy statuses: checkin, bundle, signature, lease, report
//	 "retry_after_s": 0,                  // Retry-After of a forced 429/503
//	 "delay_ms": {"checkin": 0, …},       // tenancy answers held this long
//	 "echo_bearer": false,                // tenancy error messages quote the bearer
//	 "truncate_bundle": false,            // downloads stop half way
//	 "sealed": false,                     // OpenBao answers 503 "Vault is sealed"
//	 "login_fault": "" | "wrapped" | "approle" | "no-token" | "limited-use",
//	 "token_ttl_s": 0}                    // > 0: TTL of OpenBao tokens issued from now on
package admin
