package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/agent"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

var (
	dept1 = int64(1)
	dept2 = int64(2)
	alice = access.Subject{UID: "alice", Role: "user", DepartmentID: &dept1}
	bob   = access.Subject{UID: "bob", Role: "user", DepartmentID: &dept1}
	carol = access.Subject{UID: "carol", Role: "user", DepartmentID: &dept2}
	adm   = access.Subject{UID: "adm", Role: "admin", DepartmentID: &dept2}
	root  = access.Subject{UID: "root", Role: "superadmin", DepartmentID: &dept1}
)

func newStore(t *testing.T) (*agent.Store, *pgxpool.Pool) {
	t.Helper()
	pool, _ := pgtest.NewDatabase(t)
	tools := tool.NewRegistry(tool.AskUserQuestion{}, tool.MarkForImprovement{Pool: pool})
	return agent.NewStore(pool, tools.Has), pool
}

func code(err error) string {
	if err == nil {
		return ""
	}
	if fe, ok := failure.As(err); ok {
		return fe.Code
	}
	return "uncoded: " + err.Error()
}

func kind(err error) failure.Kind {
	if fe, ok := failure.As(err); ok {
		return fe.Kind
	}
	return failure.KindInternal
}

// slugRe is the shape of a generated slug.
var slugRe = regexp.MustCompile(`^agent-[0-9a-f]{10}$`)

func raw(s string) *json.RawMessage { r := json.RawMessage(s); return &r }

func mustCreate(t *testing.T, s *agent.Store, sub access.Subject, in agent.Input) agent.Agent {
	t.Helper()
	a, err := s.Create(context.Background(), sub, in)
	if err != nil {
		t.Fatalf("create %+v: %v", in, err)
	}
	return a
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func defaults(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT slug FROM agents WHERE is_default ORDER BY slug`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func TestSeededDefaultAgent(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	d, err := s.Default(ctx, bob)
	if err != nil {
		t.Fatal(err)
	}
	if d.Slug != "default-chatbot" || !d.IsDefault || !d.IsBuiltin || d.BackendID != agent.BackendChatbot || d.Permission != "read" {
		t.Fatalf("default agent = %+v", d)
	}
	if string(d.ShareConfig) != "null" {
		t.Errorf("built-in agent share_config = %s, want null (readable by everyone)", d.ShareConfig)
	}
	if c, err := d.Context(); err != nil || c.Resolve().SystemPrompt != agent.DefaultSystemPrompt {
		t.Errorf("default context: %+v %v", c, err)
	}
	got, err := s.Get(ctx, carol, "default-chatbot")
	if err != nil || got.ID != d.ID || got.Permission != "read" {
		t.Fatalf("Get default as user: %+v %v", got, err)
	}
	if r, _ := s.Get(ctx, root, "default-chatbot"); r.Permission != "manage" {
		t.Errorf("superadmin permission on the built-in = %q", r.Permission)
	}
	if got := defaults(t, pool); len(got) != 1 || got[0] != "default-chatbot" {
		t.Fatalf("defaults = %v", got)
	}
}

func TestCreateAgent(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()

	a := mustCreate(t, s, alice, agent.Input{Name: ptr("  Researcher  "), Description: ptr("finds things"), Icon: ptr("🔍"),
		Pics: raw(`["a.png"]`), ConfigJSON: raw(`{"context": {"model": "p:m", "tools": ["ask_user_question"], "knowledges": ["kb1"]}}`),
		BackendID: ptr(agent.BackendChatbot), IsSubagent: ptr(false), SetDefault: ptr(false)})
	if !slugRe.MatchString(a.Slug) || a.Name != "Researcher" || a.Description != "finds things" || *a.Icon != "🔍" ||
		a.IsDefault || a.IsBuiltin || *a.CreatedBy != "alice" || *a.UpdatedBy != "alice" || a.Permission != "manage" || !creatorOnly(a.ShareConfig) {
		t.Fatalf("created = %+v", a)
	}
	c, _ := a.Context()
	if *c.Model != "p:m" || len(c.Knowledges) != 1 || c.Knowledges[0] != "kb1" {
		t.Fatalf("stored context = %+v", c)
	}
	var storedName, storedBy string
	if err := pool.QueryRow(ctx, `SELECT name, created_by FROM agents WHERE slug = $1`, a.Slug).Scan(&storedName, &storedBy); err != nil ||
		storedName != "Researcher" || storedBy != "alice" {
		t.Fatalf("row: %q %q %v", storedName, storedBy, err)
	}

	// Generated slugs are unique.
	b := mustCreate(t, s, alice, agent.Input{Name: ptr("Second")})
	if b.Slug == a.Slug || !slugRe.MatchString(b.Slug) {
		t.Fatalf("generated slugs %q %q", a.Slug, b.Slug)
	}
	if string(b.ConfigJSON) != `{"context": {}}` || string(b.Pics) != `[]` {
		t.Errorf("defaults: config %s pics %s", b.ConfigJSON, b.Pics)
	}

	// An explicit slug.
	mine := mustCreate(t, s, alice, agent.Input{Name: ptr("Mine"), Slug: ptr("my-agent_1")})
	if mine.Slug != "my-agent_1" {
		t.Fatalf("slug = %q", mine.Slug)
	}
	before := count(t, pool, `SELECT count(*) FROM agents`)

	dup, err := s.Create(ctx, bob, agent.Input{Name: ptr("Copy"), Slug: ptr("my-agent_1")})
	if kind(err) != failure.KindConflict || code(err) != "slug_taken" {
		t.Fatalf("duplicate slug: %+v %v", dup, err)
	}
	if dupOwner := count(t, pool, `SELECT count(*) FROM agents WHERE slug = 'my-agent_1' AND created_by = 'alice' AND name = 'Mine'`); dupOwner != 1 {
		t.Fatal("duplicate create changed the existing agent")
	}

	refused := []struct {
		name string
		in   agent.Input
		code string
	}{
		{"no name", agent.Input{}, "invalid_agent"},
		{"blank name", agent.Input{Name: ptr("   ")}, "invalid_agent"},
		{"long name", agent.Input{Name: ptr(strings.Repeat("n", 201))}, "invalid_agent"},
		{"uppercase slug", agent.Input{Name: ptr("x"), Slug: ptr("MyAgent")}, "invalid_slug"},
		{"slug with space", agent.Input{Name: ptr("x"), Slug: ptr("my agent")}, "invalid_slug"},
		{"slug with slash", agent.Input{Name: ptr("x"), Slug: ptr("a/b")}, "invalid_slug"},
		{"slug starting with dash", agent.Input{Name: ptr("x"), Slug: ptr("-a")}, "invalid_slug"},
		{"empty slug", agent.Input{Name: ptr("x"), Slug: ptr("")}, "invalid_slug"},
		{"slug of 81", agent.Input{Name: ptr("x"), Slug: ptr(strings.Repeat("b", 81))}, "invalid_slug"},
		{"set_default true", agent.Input{Name: ptr("x"), SetDefault: ptr(true)}, "set_default_not_allowed"},
		{"unknown backend", agent.Input{Name: ptr("x"), BackendID: ptr("DeepAgent")}, "unknown_backend"},
		{"unknown tool", agent.Input{Name: ptr("x"), ConfigJSON: raw(`{"context": {"tools": ["shell"]}}`)}, "invalid_context"},
		{"bad model spec", agent.Input{Name: ptr("x"), ConfigJSON: raw(`{"context": {"model": "gpt"}}`)}, "invalid_context"},
		{"config not an object", agent.Input{Name: ptr("x"), ConfigJSON: raw(`{"context": []}`)}, "invalid_config_json"},
		{"share config v1", agent.Input{Name: ptr("x"), ShareConfig: raw(`{"version": 1, "read_scope": {"access_level": "global"}}`)}, "invalid_share_config"},
		{"pics not strings", agent.Input{Name: ptr("x"), Pics: raw(`[1]`)}, "invalid_agent"},
	}
	for _, r := range refused {
		if a, err := s.Create(ctx, alice, r.in); kind(err) != failure.KindUnprocessable || code(err) != r.code {
			t.Errorf("%s: want 422 %s, got %+v %v", r.name, r.code, a, err)
		}
	}
	if after := count(t, pool, `SELECT count(*) FROM agents`); after != before {
		t.Fatalf("refused creates wrote rows: %d → %d", before, after)
	}
	if got := defaults(t, pool); len(got) != 1 || got[0] != "default-chatbot" {
		t.Fatalf("defaults after creates = %v", got)
	}
	// The longest legal slug.
	if _, err := s.Create(ctx, alice, agent.Input{Name: ptr("x"), Slug: ptr(strings.Repeat("z", 80))}); err != nil {
		t.Fatalf("80-character slug: %v", err)
	}
}

func TestAgentVisibility(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	shared := mustCreate(t, s, alice, agent.Input{Name: ptr("For Bob"), Slug: ptr("for-bob"),
		ShareConfig: raw(`{"version": 2, "read_scope": {"access_level": "user", "user_uids": ["bob"]}, "manage_scope": null}`)})

	// carol is not in the read scope: the agent does not exist for her.
	if a, err := s.Get(ctx, carol, "for-bob"); !errors.Is(err, agent.ErrNotFound) || code(err) != "agent_not_found" {
		t.Fatalf("carol sees it: %+v %v", a, err)
	}
	if _, err := s.Update(ctx, carol, "for-bob", agent.Input{Name: ptr("carol was here")}); code(err) != "agent_not_found" {
		t.Fatalf("carol updates: %v", err)
	}
	if err := s.Delete(ctx, carol, "for-bob"); code(err) != "agent_not_found" {
		t.Fatalf("carol deletes: %v", err)
	}
	// An admin is not in the read scope either: the role ceiling does not grant access.
	if _, err := s.Get(ctx, adm, "for-bob"); code(err) != "agent_not_found" {
		t.Fatalf("admin sees it: %v", err)
	}
	// A missing agent looks the same.
	if _, err := s.Get(ctx, bob, "no-such-agent"); code(err) != "agent_not_found" {
		t.Fatalf("missing: %v", err)
	}

	// bob may read but not change it.
	got, err := s.Get(ctx, bob, "for-bob")
	if err != nil || got.ID != shared.ID || got.Permission != "read" {
		t.Fatalf("bob: %+v %v", got, err)
	}
	if _, err := s.Update(ctx, bob, "for-bob", agent.Input{Name: ptr("bob was here")}); kind(err) != failure.KindForbidden || code(err) != "agent_manage_forbidden" {
		t.Fatalf("bob updates: %v", err)
	}
	if err := s.Delete(ctx, bob, "for-bob"); kind(err) != failure.KindForbidden || code(err) != "agent_manage_forbidden" {
		t.Fatalf("bob deletes: %v", err)
	}
	var name, updatedBy string
	if err := pool.QueryRow(ctx, `SELECT name, updated_by FROM agents WHERE slug = 'for-bob'`).Scan(&name, &updatedBy); err != nil ||
		name != "For Bob" || updatedBy != "alice" {
		t.Fatalf("refused changes touched the row: %q %q %v", name, updatedBy, err)
	}

	// The creator and a superadmin manage it.
	for _, sub := range []access.Subject{alice, root} {
		a, err := s.Get(ctx, sub, "for-bob")
		if err != nil || a.Permission != "manage" {
			t.Fatalf("%s: %+v %v", sub.UID, a, err)
		}
		u, err := s.Update(ctx, sub, "for-bob", agent.Input{Description: ptr("by " + sub.UID)})
		if err != nil || u.Description != "by "+sub.UID || *u.UpdatedBy != sub.UID || u.Permission != "manage" {
			t.Fatalf("%s updates: %+v %v", sub.UID, u, err)
		}
	}

	// A manage scope grants management to a listed reader.
	mustCreate(t, s, alice, agent.Input{Name: ptr("Team"), Slug: ptr("team"),
		ShareConfig: raw(`{"version": 2, "read_scope": {"access_level": "department", "department_ids": [1]},
			"manage_scope": {"access_level": "user", "user_uids": ["bob"]}}`)})
	if a, err := s.Get(ctx, bob, "team"); err != nil || a.Permission != "manage" {
		t.Fatalf("bob on team: %+v %v", a, err)
	}
	if _, err := s.Update(ctx, bob, "team", agent.Input{Name: ptr("Team B")}); err != nil {
		t.Fatalf("bob manages team: %v", err)
	}
	if _, err := s.Get(ctx, carol, "team"); code(err) != "agent_not_found" {
		t.Fatalf("carol (other department) on team: %v", err)
	}

	// An unreadable stored share_config falls back to creator only.
	if _, err := pool.Exec(ctx, `UPDATE agents SET share_config = '{"version": 1}' WHERE slug = 'team'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, bob, "team"); code(err) != "agent_not_found" {
		t.Fatalf("bob with a corrupt share_config: %v", err)
	}
	if a, err := s.Get(ctx, alice, "team"); err != nil || a.Permission != "manage" {
		t.Fatalf("creator with a corrupt share_config: %+v %v", a, err)
	}
}

func TestListReturnsOnlyVisibleAgents(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	mustCreate(t, s, alice, agent.Input{Name: ptr("Alice only"), Slug: ptr("alice-only"), ShareConfig: raw(`{"version": 2, "read_scope": {"access_level": "user"}}`)})
	mustCreate(t, s, alice, agent.Input{Name: ptr("For Bob"), Slug: ptr("for-bob"), ShareConfig: raw(`{"version": 2, "read_scope": {"access_level": "user", "user_uids": ["bob"]}}`)})
	mustCreate(t, s, alice, agent.Input{Name: ptr("Dept 2"), Slug: ptr("dept-2"), ShareConfig: raw(`{"version": 2, "read_scope": {"access_level": "department", "department_ids": [2]}}`)})
	mustCreate(t, s, alice, agent.Input{Name: ptr("Everyone"), Slug: ptr("everyone"), ShareConfig: raw(`{"version": 2, "read_scope": {"access_level": "global"}}`)})
	mustCreate(t, s, alice, agent.Input{Name: ptr("Helper"), Slug: ptr("helper"), IsSubagent: ptr(true),
		ShareConfig: raw(`{"version": 2, "read_scope": {"access_level": "global"}}`)})
	// Without share_config an agent is its creator's alone (issue 9).
	mustCreate(t, s, alice, agent.Input{Name: ptr("Unshared"), Slug: ptr("unshared")})

	list := func(sub access.Subject, subagents bool) map[string]string {
		t.Helper()
		l, err := s.List(ctx, sub, subagents)
		if err != nil {
			t.Fatal(err)
		}
		if len(l) == 0 || l[0].Slug != "default-chatbot" {
			t.Fatalf("default must come first: %+v", l)
		}
		out := map[string]string{}
		for _, a := range l {
			out[a.Slug] = a.Permission
		}
		return out
	}
	eq := func(who string, got, want map[string]string) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s sees %v, want %v", who, got, want)
		}
	}
	eq("alice", list(alice, false), map[string]string{"default-chatbot": "read", "alice-only": "manage", "for-bob": "manage", "dept-2": "manage", "everyone": "manage", "unshared": "manage"})
	eq("bob", list(bob, false), map[string]string{"default-chatbot": "read", "for-bob": "read", "everyone": "read"})
	eq("carol", list(carol, false), map[string]string{"default-chatbot": "read", "dept-2": "read", "everyone": "read"})
	eq("root", list(root, false), map[string]string{"default-chatbot": "manage", "alice-only": "manage", "for-bob": "manage", "dept-2": "manage", "everyone": "manage", "unshared": "manage"})
	eq("bob with subagents", list(bob, true), map[string]string{"default-chatbot": "read", "for-bob": "read", "everyone": "read", "helper": "read"})
}

func TestUpdateMergesAndKeepsUnknownContextFields(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	cfg := `{"context": {"system_prompt": "v1", "knowledges": ["kb_1"], "mcps": ["github"], "subagents": [{"slug": "x"}]}, "ui": {"color": "red"}}`
	a := mustCreate(t, s, alice, agent.Input{Name: ptr("Agent"), Slug: ptr("agent"), Description: ptr("d1"), Icon: ptr("i1"),
		Pics: raw(`["p1"]`), ConfigJSON: raw(cfg),
		ShareConfig: raw(`{"version": 2, "read_scope": {"access_level": "global"}, "manage_scope": null}`)})

	// Only the name changes: everything else stays as it was.
	u, err := s.Update(ctx, alice, "agent", agent.Input{Name: ptr(" Renamed ")})
	if err != nil {
		t.Fatal(err)
	}
	if u.Name != "Renamed" || u.Description != "d1" || *u.Icon != "i1" || u.IsSubagent || u.UpdatedAt.Before(a.UpdatedAt) {
		t.Fatalf("after rename: %+v", u)
	}
	sameJSON(t, u.ConfigJSON, []byte(cfg))
	sameJSON(t, u.Pics, []byte(`["p1"]`))
	sameJSON(t, u.ShareConfig, []byte(`{"version": 2, "read_scope": {"access_level": "global"}, "manage_scope": null}`))

	// A new context from a client that round-tripped the agent keeps the fields it does not know.
	c, _ := u.Context()
	c.SystemPrompt = ptr("v2")
	c.Tools = []string{"mark_for_improvement"}
	body, _ := json.Marshal(map[string]any{"context": c})
	u, err = s.Update(ctx, alice, "agent", agent.Input{ConfigJSON: raw(string(body)), Description: ptr("d2")})
	if err != nil {
		t.Fatal(err)
	}
	var stored []byte
	if err := pool.QueryRow(ctx, `SELECT config_json FROM agents WHERE slug = 'agent'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	sameJSON(t, stored, []byte(`{"context": {"system_prompt": "v2", "tools": ["mark_for_improvement"], "knowledges": ["kb_1"], "mcps": ["github"], "subagents": [{"slug": "x"}]}}`))
	if u.Name != "Renamed" || u.Description != "d2" {
		t.Fatalf("after context update: %+v", u)
	}

	// share_config: null makes it private to its creator again (never
	// global: issue 9); the slug cannot change; invalid input changes nothing.
	if u, err = s.Update(ctx, alice, "agent", agent.Input{ShareConfig: raw(`null`), IsSubagent: ptr(true)}); err != nil || !creatorOnly(u.ShareConfig) || !u.IsSubagent {
		t.Fatalf("clear share_config: %s %v", u.ShareConfig, err)
	}
	if n := count(t, pool, `SELECT count(*) FROM agents WHERE slug = 'agent' AND share_config->'read_scope'->>'access_level' = 'user'`); n != 1 {
		t.Fatal("share_config null must be stored as creator-only")
	}
	for _, in := range []agent.Input{
		{Slug: ptr("other")},
		{Name: ptr("")},
		{SetDefault: ptr(true)},
		{ConfigJSON: raw(`{"context": {"max_execution_steps": 0}}`)},
		{ConfigJSON: raw(`{"context": {"tools": ["mark_for_improvement", "mark_for_improvement"]}}`)},
		{ShareConfig: raw(`{"version": 2, "read_scope": {"access_level": "user", "user_uids": ["bob"]}, "manage_scope": {"access_level": "global"}}`)},
	} {
		if _, err := s.Update(ctx, alice, "agent", in); kind(err) != failure.KindUnprocessable {
			t.Errorf("update %+v: want 422, got %v", in, err)
		}
	}
	if _, err := s.Update(ctx, alice, "agent", agent.Input{Slug: ptr("agent"), Name: ptr("Same slug")}); err != nil {
		t.Errorf("repeating the slug is allowed: %v", err)
	}
	if n := count(t, pool, `SELECT count(*) FROM agents WHERE slug = 'agent' AND name = 'Same slug' AND description = 'd2' AND is_subagent`); n != 1 {
		t.Fatal("refused updates changed the agent")
	}
	if _, err := s.Update(ctx, alice, "missing", agent.Input{Name: ptr("x")}); code(err) != "agent_not_found" {
		t.Fatalf("update missing: %v", err)
	}
}

func TestDeleteAgent(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()

	for _, sub := range []access.Subject{root, adm, alice} {
		err := s.Delete(ctx, sub, "default-chatbot")
		if sub.Role == "superadmin" && (kind(err) != failure.KindConflict || code(err) != "agent_builtin") {
			t.Fatalf("superadmin deletes the built-in: %v", err)
		}
		if sub.Role != "superadmin" && code(err) != "agent_manage_forbidden" {
			t.Fatalf("%s deletes the built-in: %v", sub.UID, err)
		}
	}
	if n := count(t, pool, `SELECT count(*) FROM agents WHERE slug = 'default-chatbot' AND is_default`); n != 1 {
		t.Fatal("the built-in default is gone")
	}

	mustCreate(t, s, alice, agent.Input{Name: ptr("Temp"), Slug: ptr("temp")})
	if err := s.Delete(ctx, alice, "temp"); err != nil {
		t.Fatal(err)
	}
	if n := count(t, pool, `SELECT count(*) FROM agents WHERE slug = 'temp'`); n != 0 {
		t.Fatal("deleted agent still stored")
	}
	if err := s.Delete(ctx, alice, "temp"); code(err) != "agent_not_found" {
		t.Fatalf("second delete: %v", err)
	}

	// A user agent that became the default cannot be deleted either.
	mustCreate(t, s, alice, agent.Input{Name: ptr("Main"), Slug: ptr("main")})
	if err := s.SetDefault(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, alice, "main"); code(err) != "agent_builtin" {
		t.Fatalf("delete the default: %v", err)
	}
}

func TestSetDefaultMovesTheFlag(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	mustCreate(t, s, alice, agent.Input{Name: ptr("A"), Slug: ptr("a")})
	mustCreate(t, s, alice, agent.Input{Name: ptr("B"), Slug: ptr("b")})

	for _, slug := range []string{"a", "a", "b", "default-chatbot"} {
		if err := s.SetDefault(ctx, slug); err != nil {
			t.Fatalf("set %s: %v", slug, err)
		}
		if got := defaults(t, pool); len(got) != 1 || got[0] != slug {
			t.Fatalf("after SetDefault(%s): defaults = %v", slug, got)
		}
		d, err := s.Default(ctx, alice)
		if err != nil || d.Slug != slug {
			t.Fatalf("Default after SetDefault(%s) = %+v %v", slug, d, err)
		}
	}
	if err := s.SetDefault(ctx, "missing"); code(err) != "agent_not_found" {
		t.Fatalf("missing: %v", err)
	}
	if got := defaults(t, pool); len(got) != 1 || got[0] != "default-chatbot" {
		t.Fatalf("a failed SetDefault changed the default: %v", got)
	}
	// The built-in flag stays with the built-in.
	if n := count(t, pool, `SELECT count(*) FROM agents WHERE is_builtin`); n != 1 {
		t.Fatalf("built-in agents: %d", n)
	}
}

func TestSetDefaultConcurrently(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	slugs := []string{"default-chatbot"}
	for i := 0; i < 6; i++ {
		slug := fmt.Sprintf("agent-%d", i)
		mustCreate(t, s, alice, agent.Input{Name: ptr(slug), Slug: ptr(slug)})
		slugs = append(slugs, slug)
	}
	for round := 0; round < 5; round++ {
		var wg sync.WaitGroup
		errs := make([]error, 3*len(slugs))
		start := make(chan struct{})
		for i := range errs {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				errs[i] = s.SetDefault(ctx, slugs[i%len(slugs)])
			}(i)
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d: concurrent SetDefault(%s): %v", round, slugs[i%len(slugs)], err)
			}
		}
		if got := defaults(t, pool); len(got) != 1 {
			t.Fatalf("round %d: defaults = %v, want exactly one", round, got)
		}
	}
}

// creatorOnly reports a share_config that lets only the creator (and
// superadmins) in: what an agent created without one gets.
func creatorOnly(raw json.RawMessage) bool {
	c, err := access.Parse(raw)
	return err == nil && c != nil && c.ReadScope.AccessLevel == "user" && len(c.ReadScope.UserUIDs) == 0 && c.ManageScope == nil
}
