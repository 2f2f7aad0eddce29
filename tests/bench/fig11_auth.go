package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	intakeapi "github.com/yuxi-serverless/yuxi/functions/intake/intake"
	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// Figure 11: what authentication adds to a trivial request. The same route
// (GET /api/agent/backends/{id} for an unknown backend: the handler answers
// 404 without touching anything) is called with a JWT, with an API key, and
// without credentials (answered 401 by the same edge, same mux, same error
// writer): the unauthenticated call is the floor. The intake runs in the
// bench process over the figure's own database, as the platform wires it:
// the principal cache on (YUXI_AUTH_CACHE_TTL's default), invalidated
// through Redis. The detail line repeats the measure with the cache off.
const (
	authRounds   = 5
	authPerRound = 400
	authTarget   = 1.5 // issue 9: ≤ 1.5× the unauthenticated p50
)

func figAuth(ctx context.Context, e *env, r *benchkit.Report) error {
	r.Section("[11] authenticated trivial request (JWT, API key) vs the same route unauthenticated, p50",
		"in-process intake over the figure's database; one client, sequential requests over keep-alive; "+
			"rounds alternate floor (no credentials: 401), JWT, API key; principal cache TTL 5s (issue 9); "+
			"detail: the same with the cache off")
	db, _, drop, err := e.Scratch(ctx)
	if err != nil {
		return err
	}
	defer drop()
	pool, err := pgxpool.New(ctx, db.URL)
	if err != nil {
		return err
	}
	defer pool.Close()

	measure := func(ttl time.Duration) (floor, jwt, key benchkit.Samples, err error) {
		svc, err := auth.NewService(pool, auth.Config{JWTSecret: []byte("bench-jwt-secret-0123456789abcdef"),
			APIKeySecret: []byte("bench-api-key-secret-0123456789ab"), CacheTTL: ttl})
		if err != nil {
			return nil, nil, nil, err
		}
		tok, err := svc.Login(ctx, "root", "bench-password-1")
		if err != nil {
			first, ierr := svc.Initialize(ctx, "root", "bench-password-1", "Root")
			if ierr != nil {
				return nil, nil, nil, fmt.Errorf("initialize: %w (login: %v)", ierr, err)
			}
			tok = first
		}
		p, err := svc.Authenticate(ctx, "Bearer "+tok.AccessToken)
		if err != nil {
			return nil, nil, nil, err
		}
		k, err := svc.CreateAPIKey(ctx, p, auth.NewAPIKey{RequestID: fmt.Sprintf("bench-key-%d", ttl), Name: "bench"})
		if err != nil {
			return nil, nil, nil, err
		}
		srv := httptest.NewServer(intakeapi.New(intakeapi.Deps{Auth: svc}).Handler())
		defer srv.Close()
		client := srv.Client()
		call := func(authz string, want int) (time.Duration, error) {
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/agent/backends/none", nil)
			if authz != "" {
				req.Header.Set("Authorization", authz)
			}
			t0 := time.Now()
			res, err := client.Do(req)
			if err != nil {
				return 0, err
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			d := time.Since(t0)
			if res.StatusCode != want {
				return 0, fmt.Errorf("GET with %q: %d, want %d", authz[:min(len(authz), 12)], res.StatusCode, want)
			}
			return d, nil
		}
		kinds := []struct {
			authz string
			want  int
			into  *benchkit.Samples
		}{{"", 401, &floor}, {"Bearer " + tok.AccessToken, 404, &jwt}, {"Bearer " + k.Secret, 404, &key}}
		for round := range authRounds + 1 { // round 0 warms up
			for _, kd := range kinds {
				for range authPerRound {
					d, err := call(kd.authz, kd.want)
					if err != nil {
						return nil, nil, nil, err
					}
					if round > 0 {
						*kd.into = append(*kd.into, d)
					}
				}
			}
		}
		return floor, jwt, key, nil
	}

	e.Progress("figure 11: %d rounds of %d requests each, cache on", authRounds, authPerRound)
	floor, jwt, key, err := measure(5 * time.Second)
	if err != nil {
		return err
	}
	jr, kr := benchkit.DurRatio(jwt.P50(), floor.P50()), benchkit.DurRatio(key.P50(), floor.P50())
	r.Line("auth_jwt_p50", benchkit.Ms(jwt.P50()), benchkit.X(jr)+" vs floor "+benchkit.Ms(floor.P50())+" (same route, no credentials)",
		fmt.Sprintf("≤ %.1f×", authTarget), jr <= authTarget)
	r.Line("auth_api_key_p50", benchkit.Ms(key.P50()), benchkit.X(kr)+" vs floor "+benchkit.Ms(floor.P50())+" (same route, no credentials)",
		fmt.Sprintf("≤ %.1f×", authTarget), kr <= authTarget)
	e.Progress("figure 11: the same with the cache off")
	f0, j0, k0, err := measure(0)
	if err != nil {
		return err
	}
	r.Detail("cache off: JWT p50 %s (%s), API key p50 %s (%s) vs floor %s; %d samples each; staleness bound with the cache on: "+
		"immediate through Redis, 5s (the TTL) if an invalidation is lost",
		benchkit.Ms(j0.P50()), benchkit.X(benchkit.DurRatio(j0.P50(), f0.P50())), benchkit.Ms(k0.P50()),
		benchkit.X(benchkit.DurRatio(k0.P50(), f0.P50())), benchkit.Ms(f0.P50()), len(jwt))
	return nil
}
