package intake_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/functions/intake/intake"
	"github.com/yuxi-serverless/yuxi/shared/kb"
)

var pathParam = regexp.MustCompile(`\{[a-z_]+(\.\.\.)?\}|\{\$\}`)

// concretePath fills a route's path parameters with sample values.
func concretePath(p string) string {
	return pathParam.ReplaceAllStringFunc(p, func(m string) string {
		switch {
		case m == "{$}":
			return ""
		case strings.HasSuffix(m, "...}"):
			return "a/b.png"
		}
		return "x_" + strings.Trim(m, "{}")
	})
}

// TestRouteTableAccess walks the route table: every route that is not
// public answers 401 to a caller without credentials and with a bad token,
// and every admin or superadmin route answers 403 to a plain user, before
// its handler runs.
func TestRouteTableAccess(t *testing.T) {
	t.Parallel()
	a := newAuthAPI(t)
	root := a.initRoot()
	userTok := a.addUser(root, "plain")
	// A server whose table includes the knowledge routes; their handlers
	// never run here since every request below is refused first.
	full := intake.New(intake.Deps{Auth: a.svc, KBs: &kb.Store{}})
	srv := httptest.NewServer(full.Handler())
	t.Cleanup(srv.Close)
	a.srv = srv

	routes := full.Routes()
	if len(routes) < 60 {
		t.Fatalf("route table has %d routes; expected the knowledge routes too", len(routes))
	}
	seen := map[string]bool{}
	for _, rt := range routes {
		if seen[rt.Pattern()] {
			t.Errorf("route %s declared twice", rt.Pattern())
		}
		seen[rt.Pattern()] = true
		path := concretePath(rt.Path)
		switch rt.Access {
		case intake.Public:
			continue
		case intake.User, intake.Admin, intake.SuperAdmin:
		default:
			t.Errorf("route %s has unknown access %q", rt.Pattern(), rt.Access)
			continue
		}
		for _, tok := range []string{"", "not-a-token"} {
			r := a.call(rt.Method, path, tok, "application/json", "{}")
			if r.status != http.StatusUnauthorized || r.errorCode() == "" {
				t.Errorf("%s %s with token %q: got %d %s, want 401 with an error code", rt.Method, path, tok, r.status, r.raw)
			}
		}
		if rt.Access == intake.Admin || rt.Access == intake.SuperAdmin {
			r := a.call(rt.Method, path, userTok, "application/json", "{}")
			if r.status != http.StatusForbidden || !strings.HasSuffix(r.errorCode(), "_required") {
				t.Errorf("%s %s as a plain user: got %d %s, want 403 *_required", rt.Method, path, r.status, r.raw)
			}
		}
	}
}
