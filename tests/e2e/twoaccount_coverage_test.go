package e2e

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/yuxi-serverless/yuxi/functions/intake/intake"
)

// coverage records which roles the two-account suite called each route of
// the table as: every client's transport looks its request up in a mux
// built from the table (the same patterns the server routes by). A request
// without a token counts as anonymous.
type coverage struct {
	mux, ext *http.ServeMux
	routes   []intake.Route
	mu       sync.Mutex
	seen     map[string]map[string]bool // pattern → role → called
}

// suiteRoles are the roles of the matrix.
var suiteRoles = []string{"owner", "user of A's department", "admin of A's department", "user of another department",
	"admin of another department", "anonymous"}

func newCoverage(routes []intake.Route) *coverage {
	c := &coverage{mux: http.NewServeMux(), ext: http.NewServeMux(), routes: routes, seen: map[string]map[string]bool{}}
	for _, rt := range routes {
		m := c.mux
		if strings.HasPrefix(rt.Path, "/api/knowledge/databases/external/") {
			m = c.ext
		}
		m.Handle(rt.Pattern(), http.NotFoundHandler())
	}
	return c
}

func (c *coverage) record(role string, r *http.Request) {
	if r.Header.Get("Authorization") == "" {
		role = "anonymous"
	}
	m := c.mux
	if strings.HasPrefix(r.URL.Path, "/api/knowledge/databases/external/") {
		m = c.ext
	}
	_, pattern := m.Handler(r)
	if pattern == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[pattern] == nil {
		c.seen[pattern] = map[string]bool{}
	}
	c.seen[pattern][role] = true
}

// client is an HTTP client whose requests count as role's.
func (c *coverage) client(role string) *http.Client {
	return &http.Client{Timeout: 15 * time.Second, Transport: recordingTransport{c: c, role: role}}
}

type recordingTransport struct {
	c    *coverage
	role string
}

func (t recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.c.record(t.role, r)
	return http.DefaultTransport.RoundTrip(r)
}

// summary is "N of M route×role pairs" and the pairs never called.
func (c *coverage) summary() (covered, total int, missing []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rt := range c.routes {
		for _, role := range suiteRoles {
			total++
			if c.seen[rt.Pattern()][role] {
				covered++
			} else {
				missing = append(missing, fmt.Sprintf("%s as %s", rt.Pattern(), role))
			}
		}
	}
	sort.Strings(missing)
	return covered, total, missing
}
