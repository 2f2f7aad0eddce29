package intake_test

import (
	"context"
	"errors"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/queue"
	"github.com/yuxi-serverless/yuxi/shared/thread"
)

func TestThreadRoutesCreate(t *testing.T) {
	t.Parallel()
	a := newChatAPI(t)
	a.want(a.call("POST", "/api/agent", "alice", `{"name": "For Bob", "slug": "for-bob",
		"share_config": {"version": 2, "read_scope": {"access_level": "user", "user_uids": ["bob"]}}}`), 200, "", "create agent")

	r := a.call("POST", "/api/chat/thread", "alice", `{"request_id": "req-thread-1", "title": "Hello", "agent_id": "default-chatbot", "metadata": {"k": "v"}}`)
	a.want(r, 200, "", "alice creates")
	id := r.str("id")
	if len(id) != 32 || r.body["uid"] != "alice" || r.body["agent_id"] != "default-chatbot" || r.body["title"] != "Hello" ||
		r.body["thread_status"] != "done" || r.body["is_pinned"] != false {
		t.Fatalf("created: %s", r.raw)
	}
	if meta, _ := r.body["metadata"].(map[string]any); meta["k"] != "v" {
		t.Fatalf("metadata: %s", r.raw)
	}
	replay := a.call("POST", "/api/chat/thread", "alice", `{"request_id": "req-thread-1", "title": "Again", "agent_id": "default-chatbot"}`)
	a.want(replay, 200, "", "replay")
	if replay.str("id") != id || replay.body["title"] != "Hello" {
		t.Fatalf("replay answered another thread: %s", replay.raw)
	}
	a.want(a.call("POST", "/api/chat/thread", "alice", `{"request_id": "req-thread-1", "agent_id": "for-bob"}`), 409, "request_id_conflict", "same request id, another agent")

	before := a.f.Count(`SELECT count(*) FROM conversations`)
	// carol cannot start a thread with an agent she cannot see.
	a.want(a.call("POST", "/api/chat/thread", "carol", `{"agent_id": "for-bob"}`), 404, "agent_not_found", "carol with an invisible agent")
	a.want(a.call("POST", "/api/chat/thread", "carol", `{"agent_id": "no-such-agent"}`), 404, "agent_not_found", "missing agent")
	a.want(a.call("POST", "/api/chat/thread", "carol", `{"title": "x"}`), 422, "invalid_thread", "no agent")
	a.want(a.call("POST", "/api/chat/thread", "carol", `{"agent_id": "default-chatbot",`), 400, "invalid_json", "malformed JSON")
	a.want(a.call("POST", "/api/chat/thread", "carol", `{"agent_id": "default-chatbot", "metadata": [1]}`), 422, "invalid_thread", "metadata not an object")
	a.want(a.call("POST", "/api/chat/thread", "", `{"agent_id": "default-chatbot"}`), 401, "", "anonymous")
	if after := a.f.Count(`SELECT count(*) FROM conversations`); after != before {
		t.Fatalf("refused creates wrote threads: %d → %d", before, after)
	}
	// bob may use it.
	b := a.call("POST", "/api/chat/thread", "bob", `{"agent_id": "for-bob"}`)
	a.want(b, 200, "", "bob with the shared agent")
	if b.body["agent_id"] != "for-bob" || b.body["title"] != "New conversation" {
		t.Fatalf("bob's thread: %s", b.raw)
	}
	// The same request id is a different thread for another user.
	c := a.call("POST", "/api/chat/thread", "bob", `{"request_id": "req-thread-1", "agent_id": "default-chatbot"}`)
	a.want(c, 200, "", "bob reuses alice's request id")
	if c.str("id") == id {
		t.Fatal("bob got alice's thread through her request id")
	}
}

func TestThreadRoutesListAndTwoAccounts(t *testing.T) {
	t.Parallel()
	a := newChatAPI(t)
	a.want(a.call("POST", "/api/agent", "alice", `{"name": "Other", "slug": "other"}`), 200, "", "create agent")
	mk := func(uid, body string) string {
		t.Helper()
		r := a.call("POST", "/api/chat/thread", uid, body)
		a.want(r, 200, "", "create thread")
		return r.str("id")
	}
	t1 := mk("alice", `{"agent_id": "default-chatbot", "title": "one"}`)
	t2 := mk("alice", `{"agent_id": "other", "title": "two"}`)
	t3 := mk("alice", `{"agent_id": "default-chatbot", "title": "three"}`)
	mk("bob", `{"agent_id": "default-chatbot", "title": "bob's"}`)

	ids := func(uid, query string) []string {
		t.Helper()
		r := a.call("GET", "/api/chat/threads"+query, uid, "")
		a.want(r, 200, "", "list "+query)
		var out []string
		for _, th := range r.list("") {
			if th["uid"] != uid {
				t.Fatalf("%s's list holds %v's thread", uid, th["uid"])
			}
			if _, ok := th["thread_status"]; !ok {
				t.Fatalf("list item without thread_status: %s", r.raw)
			}
			out = append(out, th["id"].(string))
		}
		return out
	}
	eq := func(got []string, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("ids %v, want %v", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("ids %v, want %v", got, want)
			}
		}
	}
	eq(ids("alice", ""), t3, t2, t1)
	eq(ids("alice", "?agent_id=other"), t2)
	eq(ids("alice", "?limit=2"), t3, t2)
	eq(ids("alice", "?limit=2&offset=2"), t1)
	eq(ids("carol", ""))
	for _, q := range []string{"?limit=501", "?limit=abc", "?offset=-1", "?limit=-3"} {
		a.want(a.call("GET", "/api/chat/threads"+q, "alice", ""), 422, "invalid_query", "bad query "+q)
	}

	// bob can neither change nor delete nor read alice's thread, and it stays as it was.
	a.want(a.call("PUT", "/api/chat/thread/"+t1, "bob", `{"title": "mine now", "is_pinned": true}`), 404, "thread_not_found", "bob updates")
	a.want(a.call("DELETE", "/api/chat/thread/"+t1, "bob", ""), 404, "thread_not_found", "bob deletes")
	a.want(a.call("GET", "/api/chat/thread/"+t1+"/history", "bob", ""), 404, "thread_not_found", "bob reads history")
	if n := a.f.Count(`SELECT count(*) FROM conversations WHERE thread_id = $1 AND title = 'one' AND NOT is_pinned AND status = 'active'`, t1); n != 1 {
		t.Fatal("bob changed alice's thread")
	}

	// alice pins and renames; the pinned thread comes first.
	a.want(a.call("PUT", "/api/chat/thread/"+t1, "alice", `{"title": `), 400, "invalid_json", "malformed update")
	a.want(a.call("PUT", "/api/chat/thread/"+t1, "alice", `{"is_pinned": "yes"}`), 422, "invalid_request", "wrong type")
	up := a.call("PUT", "/api/chat/thread/"+t1, "alice", `{"title": "one (pinned)", "is_pinned": true}`)
	a.want(up, 200, "", "alice updates")
	if up.body["title"] != "one (pinned)" || up.body["is_pinned"] != true || up.str("id") != t1 {
		t.Fatalf("update answer: %s", up.raw)
	}
	eq(ids("alice", ""), t1, t3, t2)

	// alice deletes: gone from her list and history, row kept as deleted.
	del := a.call("DELETE", "/api/chat/thread/"+t3, "alice", "")
	a.want(del, 200, "", "alice deletes")
	if del.body["deleted"] != true || del.body["thread_id"] != t3 {
		t.Fatalf("delete answer: %s", del.raw)
	}
	eq(ids("alice", ""), t1, t2)
	a.want(a.call("GET", "/api/chat/thread/"+t3+"/history", "alice", ""), 404, "thread_not_found", "history of deleted")
	a.want(a.call("PUT", "/api/chat/thread/"+t3, "alice", `{"title": "back"}`), 404, "thread_not_found", "update deleted")
	a.want(a.call("DELETE", "/api/chat/thread/"+t3, "alice", ""), 404, "thread_not_found", "delete twice")
	if n := a.f.Count(`SELECT count(*) FROM conversations WHERE thread_id = $1 AND status = 'deleted' AND title = 'three'`, t3); n != 1 {
		t.Fatal("deleted thread not kept as a soft-deleted row")
	}
}

func TestThreadRoutesHistory(t *testing.T) {
	t.Parallel()
	a := newChatAPI(t)
	ctx := context.Background()
	r := a.call("POST", "/api/chat/thread", "alice", `{"agent_id": "default-chatbot"}`)
	a.want(r, 200, "", "create thread")
	id := r.str("id")

	alice := a.subject("alice")
	first, err := a.f.Queue.Submit(ctx, queue.Submission{Subject: alice, Query: "first", AgentSlug: "default-chatbot", ThreadID: id})
	if err != nil || first.RunID == nil {
		t.Fatalf("submit: %+v %v", first, err)
	}
	if _, err := a.f.Queue.Submit(ctx, queue.Submission{Subject: alice, Query: "waiting", AgentSlug: "default-chatbot", ThreadID: id}); err != nil {
		t.Fatal(err)
	}
	a.f.Complete(*first.RunID, "answer one")

	// bob submitting to alice's thread is refused and adds nothing.
	if _, err := a.f.Queue.Submit(ctx, queue.Submission{Subject: a.subject("bob"), Query: "intruder", AgentSlug: "default-chatbot", ThreadID: id}); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("bob submits to alice's thread: %v", err)
	}
	if n := a.f.Count(`SELECT count(*) FROM messages`); n != 3 {
		t.Fatalf("%d messages, want 3 (two of alice's, one answer)", n)
	}

	h := a.call("GET", "/api/chat/thread/"+id+"/history", "alice", "")
	a.want(h, 200, "", "alice reads history")
	items := h.list("history")
	if len(items) != 2 {
		t.Fatalf("history: %s", h.raw)
	}
	if items[0]["type"] != "human" || items[0]["content"] != "first" || items[0]["delivery_status"] != "complete" ||
		items[1]["type"] != "ai" || items[1]["content"] != "answer one" || items[1]["run_id"] != *first.RunID {
		t.Fatalf("history items: %s", h.raw)
	}
	for _, it := range items {
		if it["content"] == "waiting" || it["content"] == "intruder" {
			t.Fatalf("queued or foreign message shown: %s", h.raw)
		}
	}
	if th := a.call("GET", "/api/chat/threads", "alice", "").list(""); len(th) != 1 || th[0]["thread_status"] != "ready" {
		t.Fatalf("thread after a finished, unviewed run: %v", th)
	}
	a.want(a.call("GET", "/api/chat/thread/"+id+"/history", "bob", ""), 404, "thread_not_found", "bob reads history")
	a.want(a.call("GET", "/api/chat/thread/"+id+"/history", "", ""), 401, "", "anonymous reads history")
	a.want(a.call("GET", "/api/chat/thread/nope/history", "alice", ""), 404, "thread_not_found", "unknown thread")
}
