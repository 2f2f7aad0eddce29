package web

import (
	"fmt"
	"testing"

	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// seedHistory appends n visible messages (user and assistant in turn) to
// thread th's transcript straight in the database, returning their ids in
// transcript order: a long thread without n model runs.
func seedHistory(t testing.TB, p *testkit.Local, th string, n int) []int64 {
	t.Helper()
	rows, err := p.P.App.Pool.Query(t.Context(), `
		INSERT INTO messages (conversation_id, role, content, transcript_seq, delivery_status)
		SELECT c.id, CASE WHEN g % 2 = 1 THEN 'user' ELSE 'assistant' END,
			CASE WHEN g % 2 = 1 THEN 'Question ' || g ELSE 'Answer ' || g || E': some **Markdown** text,\n\n- a list item\n- another' END,
			nextval('transcript_seq'), CASE WHEN g % 2 = 1 THEN 'complete' END
		FROM conversations c, generate_series(1, $2) g WHERE c.thread_id = $1
		ORDER BY g RETURNING id`, th, n)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if rows.Err() != nil || len(ids) != n {
		t.Fatalf("seeded %d of %d messages: %v", len(ids), n, rows.Err())
	}
	return ids
}

// TestThreadHistoryPages: ?limit= and ?before= page a long history from
// its end (what the chat screen loads as it scrolls up); without them the
// whole history answers as before; bad cursors are 422s, another user's
// thread a 404.
func TestThreadHistoryPages(t *testing.T) {
	p := testkit.StartLocal(t, nil)
	c := p.Admin
	th := c.Thread()
	ids := seedHistory(t, p, th, 120)
	page := func(q string) ([]int64, any) {
		t.Helper()
		body := c.OK("GET", "/api/chat/thread/"+th+"/history"+q, nil)
		var got []int64
		for _, h := range body["history"].([]any) {
			got = append(got, int64(h.(map[string]any)["id"].(float64)))
		}
		return got, body["has_more"]
	}
	same := func(name string, got, want []int64) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: ids %v, want %v", name, got, want)
		}
	}
	all, more := page("")
	same("unpaged", all, ids)
	if more != nil {
		t.Fatalf("the unpaged answer grew a has_more: %v", more)
	}
	p1, more := page("?limit=50")
	same("newest page", p1, ids[70:])
	if more != true {
		t.Fatal("page 1: has_more should be true")
	}
	p2, _ := page(fmt.Sprintf("?limit=50&before=%d", p1[0]))
	same("second page", p2, ids[20:70])
	p3, more := page(fmt.Sprintf("?limit=50&before=%d", p2[0]))
	same("last page", p3, ids[:20])
	if more != false {
		t.Fatal("last page: has_more should be false")
	}
	if d, _ := page("?before=" + fmt.Sprint(ids[5])); fmt.Sprint(d) != fmt.Sprint(ids[:5]) {
		t.Fatalf("before without limit (default page of 100): %v", d)
	}
	other := c.Thread()
	otherIDs := seedHistory(t, p, other, 2)
	for q, code := range map[string]string{
		"?limit=0": "invalid_limit", "?limit=501": "invalid_limit", "?limit=x": "invalid_limit",
		"?limit=5&before=abc": "invalid_before", "?limit=5&before=-1": "invalid_before",
		fmt.Sprintf("?limit=5&before=%d", otherIDs[0]): "invalid_before", // a message of another thread
	} {
		if r := c.Do("GET", "/api/chat/thread/"+th+"/history"+q, nil); r.Status != 422 || r.Code() != code {
			t.Errorf("%s: %d %s, want 422 %s", q, r.Status, r.Body, code)
		}
	}
	if r := c.NewUser("mallory").Do("GET", "/api/chat/thread/"+th+"/history?limit=5", nil); r.Status != 404 {
		t.Fatalf("another user's thread: %d %s", r.Status, r.Body)
	}
}
