package intake_test

import (
	"reflect"
	"sort"
	"strings"
	"testing"
)

func keysOf(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestAgentRoutesBackendsFilterItemsByRole(t *testing.T) {
	t.Parallel()
	a := newChatAPI(t)
	adminItems := []string{"knowledges", "max_execution_steps", "mcps", "model", "model_retry_times", "preload_skills", "skills", "subagents",
		"summary_keep_messages", "summary_l2_trigger_ratio", "summary_prompt", "summary_threshold", "summary_tool_result_token_limit",
		"system_prompt", "tool_approval_mode", "tools"}
	userItems := []string{"knowledges", "mcps", "model", "preload_skills", "skills", "subagents", "system_prompt", "tool_approval_mode", "tools"}

	for _, tc := range []struct {
		uid   string
		items []string
	}{{"root", adminItems}, {"adm", adminItems}, {"alice", userItems}} {
		list := a.call("GET", "/api/agent/backends", tc.uid, "")
		a.want(list, 200, "", "list backends as "+tc.uid)
		backends := list.list("backends")
		if len(backends) != 1 || backends[0]["id"] != "ChatbotAgent" {
			t.Fatalf("backends as %s: %s", tc.uid, list.raw)
		}
		items, _ := backends[0]["configurable_items"].(map[string]any)
		if got := keysOf(items); !reflect.DeepEqual(got, tc.items) {
			t.Errorf("list: %s sees items %v, want %v", tc.uid, got, tc.items)
		}

		one := a.call("GET", "/api/agent/backends/ChatbotAgent", tc.uid, "")
		a.want(one, 200, "", "get backend as "+tc.uid)
		items, _ = one.body["configurable_items"].(map[string]any)
		if got := keysOf(items); !reflect.DeepEqual(got, tc.items) {
			t.Errorf("get: %s sees items %v, want %v", tc.uid, got, tc.items)
		}
		order, _ := one.body["configurable_item_order"].([]any)
		if len(order) != len(tc.items) || order[0] != "system_prompt" || order[1] != "model" || order[2] != "tools" {
			t.Errorf("item order for %s: %v", tc.uid, order)
		}
		tools, _ := items["tools"].(map[string]any)
		opts, _ := tools["options"].([]any)
		var values []string
		for _, o := range opts {
			m, _ := o.(map[string]any)
			v, _ := m["value"].(string)
			values = append(values, v)
		}
		if !reflect.DeepEqual(values, []string{"ask_user_question", "mark_for_improvement"}) {
			t.Errorf("tool options: %v", values)
		}
	}

	a.want(a.call("GET", "/api/agent/backends/DeepAgent", "alice", ""), 404, "backend_not_found", "unknown backend")
	a.want(a.call("GET", "/api/agent/backends", "", ""), 401, "not_authenticated", "anonymous")
	a.want(a.call("GET", "/api/agent/backends/ChatbotAgent", "", ""), 401, "not_authenticated", "anonymous")
}

func TestAgentRoutesDefaultAgent(t *testing.T) {
	t.Parallel()
	a := newChatAPI(t)
	for uid, perm := range map[string]string{"alice": "read", "adm": "read", "root": "manage"} {
		r := a.call("GET", "/api/agent/default", uid, "")
		a.want(r, 200, "", "default as "+uid)
		items, _ := r.body["configurable_items"].(map[string]any)
		if r.body["slug"] != "default-chatbot" || r.body["is_default"] != true || r.body["permission"] != perm || len(items) == 0 {
			t.Errorf("default as %s: %s", uid, r.raw)
		}
		_, steps := items["max_execution_steps"]
		if steps != (uid != "alice") {
			t.Errorf("default as %s: admin-only items shown = %v", uid, steps)
		}
	}
	a.want(a.call("GET", "/api/agent/default", "", ""), 401, "", "anonymous default")
}

func TestAgentRoutesLifecycleAcrossAccounts(t *testing.T) {
	t.Parallel()
	a := newChatAPI(t)
	count := a.f.Count

	created := a.call("POST", "/api/agent", "alice", `{"name": "Bob's helper", "slug": "bobs-helper", "backend_id": "ChatbotAgent",
		"description": "d", "config_json": {"context": {"system_prompt": "hi", "tools": ["ask_user_question"], "knowledges": ["kb_9"]}},
		"share_config": {"version": 2, "read_scope": {"access_level": "user", "user_uids": ["bob"]}, "manage_scope": null},
		"set_default": false}`)
	a.want(created, 200, "", "alice creates")
	if created.body["slug"] != "bobs-helper" || created.body["permission"] != "manage" || created.body["created_by"] != "alice" ||
		created.body["is_default"] != false || created.body["configurable_items"] == nil {
		t.Fatalf("created: %s", created.raw)
	}
	if n := count(`SELECT count(*) FROM agents WHERE slug = 'bobs-helper' AND created_by = 'alice'
		AND config_json->'context'->'knowledges' = '["kb_9"]' AND share_config->'read_scope'->'user_uids' = '["bob"]'`); n != 1 {
		t.Fatal("agent not stored as sent")
	}

	// Refused creates write nothing.
	before := count(`SELECT count(*) FROM agents`)
	a.want(a.call("POST", "/api/agent", "alice", `{"name": "x",`), 400, "invalid_json", "malformed JSON")
	a.want(a.call("POST", "/api/agent", "alice", ``), 400, "invalid_json", "empty body")
	a.want(a.call("POST", "/api/agent", "alice", `{"name": 5}`), 422, "invalid_request", "wrong type")
	a.want(a.call("POST", "/api/agent", "alice", `{"name": "x", "set_default": true}`), 422, "set_default_not_allowed", "set_default true")
	a.want(a.call("POST", "/api/agent", "alice", `{"name": "x", "slug": "Bad Slug"}`), 422, "invalid_slug", "bad slug")
	a.want(a.call("POST", "/api/agent", "carol", `{"name": "x", "slug": "bobs-helper"}`), 409, "slug_taken", "duplicate slug")
	a.want(a.call("POST", "/api/agent", "alice", `{"name": "x", "config_json": {"context": {"tools": ["rm"]}}}`), 422, "invalid_context", "unknown tool")
	a.want(a.call("POST", "/api/agent", "", `{"name": "x"}`), 401, "", "anonymous create")
	if after := count(`SELECT count(*) FROM agents`); after != before {
		t.Fatalf("refused creates wrote agents: %d → %d", before, after)
	}

	// Visibility: carol cannot see it, bob reads it, alice and root manage it.
	a.want(a.call("GET", "/api/agent/bobs-helper", "carol", ""), 404, "agent_not_found", "carol gets")
	a.want(a.call("GET", "/api/agent/bobs-helper", "adm", ""), 404, "agent_not_found", "admin outside the scope gets")
	for uid, perm := range map[string]string{"bob": "read", "alice": "manage", "root": "manage"} {
		r := a.call("GET", "/api/agent/bobs-helper", uid, "")
		a.want(r, 200, "", uid+" gets")
		if r.body["permission"] != perm {
			t.Errorf("%s's permission = %v, want %s", uid, r.body["permission"], perm)
		}
	}
	slugs := func(uid string) map[string]any {
		t.Helper()
		r := a.call("GET", "/api/agent", uid, "")
		a.want(r, 200, "", uid+" lists")
		out := map[string]any{}
		for _, ag := range r.list("agents") {
			out[ag["slug"].(string)] = ag["permission"]
		}
		return out
	}
	if got := slugs("carol"); !reflect.DeepEqual(got, map[string]any{"default-chatbot": "read"}) {
		t.Errorf("carol lists %v", got)
	}
	if got := slugs("bob"); !reflect.DeepEqual(got, map[string]any{"default-chatbot": "read", "bobs-helper": "read"}) {
		t.Errorf("bob lists %v", got)
	}

	// Changes: carol gets 404, bob 403, and nothing changes.
	a.want(a.call("PUT", "/api/agent/bobs-helper", "carol", `{"name": "carol's"}`), 404, "agent_not_found", "carol updates")
	a.want(a.call("PUT", "/api/agent/bobs-helper", "bob", `{"name": "bob's"}`), 403, "agent_manage_forbidden", "bob updates")
	a.want(a.call("DELETE", "/api/agent/bobs-helper", "carol", ""), 404, "agent_not_found", "carol deletes")
	a.want(a.call("DELETE", "/api/agent/bobs-helper", "bob", ""), 403, "agent_manage_forbidden", "bob deletes")
	a.want(a.call("PUT", "/api/agent/bobs-helper", "alice", `{"name": `), 400, "invalid_json", "malformed update")
	a.want(a.call("PUT", "/api/agent/bobs-helper", "alice", `{"slug": "renamed"}`), 422, "invalid_agent", "slug change")
	if n := count(`SELECT count(*) FROM agents WHERE slug = 'bobs-helper' AND name = 'Bob''s helper' AND updated_by = 'alice'`); n != 1 {
		t.Fatal("refused updates changed the agent")
	}

	// alice updates: merged fields, unknown context fields kept when sent back.
	up := a.call("PUT", "/api/agent/bobs-helper", "alice", `{"description": "new",
		"config_json": {"context": {"system_prompt": "v2", "knowledges": ["kb_9"], "mcps": ["gh"]}}}`)
	a.want(up, 200, "", "alice updates")
	if up.body["name"] != "Bob's helper" || up.body["description"] != "new" || up.body["permission"] != "manage" {
		t.Fatalf("updated: %s", up.raw)
	}
	if n := count(`SELECT count(*) FROM agents WHERE slug = 'bobs-helper' AND description = 'new'
		AND config_json = '{"context": {"system_prompt": "v2", "knowledges": ["kb_9"], "mcps": ["gh"]}}'`); n != 1 {
		t.Fatal("update not stored")
	}
	// Sharing it with everyone makes it visible to carol.
	a.want(a.call("PUT", "/api/agent/bobs-helper", "alice", `{"share_config": {"version": 2, "read_scope": {"access_level": "global"}}}`), 200, "", "share globally")
	a.want(a.call("GET", "/api/agent/bobs-helper", "carol", ""), 200, "", "carol after global share")

	// Deletion by the creator; the built-in cannot be deleted by anyone.
	del := a.call("DELETE", "/api/agent/bobs-helper", "alice", "")
	a.want(del, 200, "", "alice deletes")
	if del.body["deleted"] != true || del.body["slug"] != "bobs-helper" {
		t.Fatalf("delete answer: %s", del.raw)
	}
	if n := count(`SELECT count(*) FROM agents WHERE slug = 'bobs-helper'`); n != 0 {
		t.Fatal("agent still stored after delete")
	}
	a.want(a.call("GET", "/api/agent/bobs-helper", "alice", ""), 404, "agent_not_found", "get after delete")
	a.want(a.call("DELETE", "/api/agent/default-chatbot", "root", ""), 409, "agent_builtin", "root deletes the built-in")
	a.want(a.call("DELETE", "/api/agent/default-chatbot", "alice", ""), 403, "agent_manage_forbidden", "alice deletes the built-in")
	if n := count(`SELECT count(*) FROM agents WHERE slug = 'default-chatbot' AND is_default`); n != 1 {
		t.Fatal("the built-in default is gone")
	}
}

func TestAgentRoutesSetDefaultRequiresSuperadmin(t *testing.T) {
	t.Parallel()
	a := newChatAPI(t)
	a.want(a.call("POST", "/api/agent", "alice", `{"name": "Team", "slug": "team",
		"share_config": {"version": 2, "read_scope": {"access_level": "global"}}}`), 200, "", "create team")
	a.want(a.call("POST", "/api/agent", "alice", `{"name": "Private", "slug": "private",
		"share_config": {"version": 2, "read_scope": {"access_level": "user"}}}`), 200, "", "create private")
	defaultSlug := func() string {
		t.Helper()
		r := a.call("GET", "/api/agent/default", "bob", "")
		a.want(r, 200, "", "get default")
		return r.str("slug")
	}

	// A plain user, even the creator, may not move the default; nor may an
	// admin (of any department): the default is the instance's, the
	// superadmin's setting (issue 9, finding 3).
	a.want(a.call("POST", "/api/agent/team/set_default", "alice", ""), 403, "superadmin_required", "user sets default")
	a.want(a.call("POST", "/api/agent/team/set_default", "adm", ""), 403, "superadmin_required", "admin sets default")
	a.want(a.call("POST", "/api/agent/private/set_default", "adm", ""), 403, "superadmin_required", "admin sets an invisible agent")
	a.want(a.call("POST", "/api/agent/team/set_default", "", ""), 401, "", "anonymous sets default")
	if got := defaultSlug(); got != "default-chatbot" {
		t.Fatalf("refused set_default moved the default to %s", got)
	}
	a.want(a.call("POST", "/api/agent/missing/set_default", "root", ""), 404, "agent_not_found", "root sets a missing agent")
	if got := defaultSlug(); got != "default-chatbot" {
		t.Fatalf("a 404 set_default moved the default to %s", got)
	}

	r := a.call("POST", "/api/agent/team/set_default", "root", "")
	a.want(r, 200, "", "root sets default")
	if r.body["slug"] != "team" || r.body["is_default"] != true {
		t.Fatalf("set_default answer: %s", r.raw)
	}
	if got := defaultSlug(); got != "team" {
		t.Fatalf("default = %s, want team", got)
	}
	if n := a.f.Count(`SELECT count(*) FROM agents WHERE is_default`); n != 1 {
		t.Fatalf("%d default agents", n)
	}
	// The former default is an ordinary agent again; the new default cannot be deleted.
	if n := a.f.Count(`SELECT count(*) FROM agents WHERE slug = 'default-chatbot' AND NOT is_default`); n != 1 {
		t.Fatal("the built-in kept its default flag")
	}
	a.want(a.call("DELETE", "/api/agent/team", "alice", ""), 409, "agent_builtin", "delete the default")
	a.want(a.call("POST", "/api/agent/default-chatbot/set_default", "root", ""), 200, "", "root restores the built-in")
	if got := defaultSlug(); got != "default-chatbot" {
		t.Fatalf("default = %s after restore", got)
	}
}

// An agent created without share_config is its creator's alone (finding 3 of
// issue 9): on main every user read it, system prompt included.
func TestAgentRoutesPrivateByDefault(t *testing.T) {
	t.Parallel()
	a := newChatAPI(t)
	a.want(a.call("POST", "/api/agent", "alice", `{"name": "Mine", "slug": "mine",
		"config_json": {"context": {"system_prompt": "alice's secret prompt"}}}`), 200, "", "create without share_config")
	for _, uid := range []string{"bob", "adm"} {
		a.want(a.call("GET", "/api/agent/mine", uid, ""), 404, "agent_not_found", uid+" reads alice's agent")
		if r := a.call("GET", "/api/agent", uid, ""); strings.Contains(r.raw, "secret prompt") || strings.Contains(r.raw, `"mine"`) {
			t.Fatalf("%s lists alice's private agent: %s", uid, r.raw)
		}
		a.want(a.call("POST", "/api/chat/thread", uid, `{"agent_id": "mine", "title": "t"}`), 404, "", uid+" opens a thread on alice's agent")
	}
	r := a.call("GET", "/api/agent/mine", "alice", "")
	a.want(r, 200, "", "alice reads her agent")
	if r.body["permission"] != "manage" {
		t.Fatalf("alice's permission: %s", r.raw)
	}
	a.want(a.call("GET", "/api/agent/mine", "root", ""), 200, "", "root reads it")
	// Clearing share_config keeps it private (never global).
	a.want(a.call("PUT", "/api/agent/mine", "alice", `{"share_config": null}`), 200, "", "alice clears share_config")
	a.want(a.call("GET", "/api/agent/mine", "bob", ""), 404, "agent_not_found", "bob after share_config null")
	// Sharing is explicit.
	a.want(a.call("PUT", "/api/agent/mine", "alice", `{"share_config": {"version": 2, "read_scope": {"access_level": "global"}}}`), 200, "", "share globally")
	a.want(a.call("GET", "/api/agent/mine", "bob", ""), 200, "", "bob reads a shared agent")
	// The built-in agent stays visible to everyone.
	a.want(a.call("GET", "/api/agent/default-chatbot", "bob", ""), 200, "", "bob reads the built-in")
}

// Admin-only settings are checked on write (issue 9, finding 6): a user may
// not raise max_execution_steps or model_retry_times on an agent of their
// own, though an echo of the stored (or default) value saves; an admin may.
func TestAgentRoutesAdminOnlySettings(t *testing.T) {
	t.Parallel()
	a := newChatAPI(t)
	a.want(a.call("POST", "/api/agent", "alice", `{"name": "x", "slug": "steps",
		"config_json": {"context": {"max_execution_steps": 500}}}`), 403, "admin_only_setting", "user creates with max steps")
	a.want(a.call("POST", "/api/agent", "alice", `{"name": "x", "slug": "steps",
		"config_json": {"context": {"system_prompt": "hi"}}}`), 200, "", "user creates")
	a.want(a.call("PUT", "/api/agent/steps", "alice", `{"config_json": {"context": {"model_retry_times": 3, "system_prompt": "hi"}}}`),
		403, "admin_only_setting", "user raises retries")
	a.want(a.call("PUT", "/api/agent/steps", "alice", `{"config_json": {"context": {"system_prompt": "changed"}}}`), 200, "", "user edits the prompt")
	a.want(a.call("POST", "/api/agent", "adm", `{"name": "y", "slug": "adm-steps",
		"config_json": {"context": {"max_execution_steps": 50, "model_retry_times": 2}}}`), 200, "", "admin sets them")
	if n := a.f.Count(`SELECT count(*) FROM agents WHERE slug = 'steps' AND config_json->'context' ? 'model_retry_times'`); n != 0 {
		t.Fatal("a refused update was stored")
	}
}
