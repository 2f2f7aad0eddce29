package e2e

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// The chat routes beyond threads and runs (issue 9): simple call, thread
// state, search, viewed, message feedback, image upload; and projects. Each
// is tried by a second account on the first one's ids.
func TestChatExtras(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	alice, bob := p.Admin.NewUser("alice-x"), p.Admin.NewUser("bob-x")

	// A finished run: its assistant message is what feedback rates.
	th := alice.Thread()
	p.LLM.Enqueue(llmtest.Text("the zebra answer"))
	in := alice.Submit(th, "tell me about the zebra", nil)
	runID := in["run_id"].(string)
	if r := testkit.Render(alice.Collect(runID, 20*time.Second)); r.EndStatus != "completed" {
		t.Fatalf("run: %+v", r)
	}
	var answerID, questionID string
	for _, m := range alice.OK("GET", "/api/chat/thread/"+th+"/history", nil)["history"].([]any) {
		m := m.(map[string]any)
		switch m["type"] {
		case "ai":
			answerID = fmt.Sprint(m["id"])
		case "human":
			questionID = fmt.Sprint(m["id"])
		}
	}
	if answerID == "" || questionID == "" {
		t.Fatal("no messages in the history")
	}

	t.Run("feedback", func(t *testing.T) {
		fb := "/api/chat/message/" + answerID + "/feedback"
		if got := alice.OK("GET", fb, nil); got["has_feedback"] != false {
			t.Fatalf("feedback before any: %v", got)
		}
		first := alice.OK("POST", fb, map[string]any{"rating": "dislike", "reason": "too short"})
		edited := alice.OK("POST", fb, map[string]any{"rating": "like"})
		if first["id"] != edited["id"] || edited["rating"] != "like" || edited["reason"] != nil {
			t.Fatalf("edit: first %v, then %v", first, edited)
		}
		got := alice.OK("GET", fb, nil)
		if got["has_feedback"] != true || got["feedback"].(map[string]any)["rating"] != "like" {
			t.Fatalf("feedback after edit: %v", got)
		}
		// The history shows the caller's own feedback.
		for _, m := range alice.OK("GET", "/api/chat/thread/"+th+"/history", nil)["history"].([]any) {
			if m := m.(map[string]any); fmt.Sprint(m["id"]) == answerID {
				if f, _ := m["feedback"].(map[string]any); f == nil || f["rating"] != "like" {
					t.Fatalf("history feedback: %v", m["feedback"])
				}
			}
		}
		if r := alice.Do("POST", fb, map[string]any{"rating": "meh"}); r.Status != 422 || r.Code() != "invalid_rating" {
			t.Fatalf("bad rating: %d %s", r.Status, r.Body)
		}
		if r := alice.Do("POST", "/api/chat/message/"+questionID+"/feedback", map[string]any{"rating": "like"}); r.Status != 422 {
			t.Fatalf("feedback on a user message: %d %s", r.Status, r.Body)
		}
		// Bob: alice's message is not found, whatever the body; nothing stored.
		for _, body := range []map[string]any{{"rating": "dislike"}, {"rating": "meh"}} {
			if r := bob.Do("POST", fb, body); r.Status != 404 || r.Code() != "message_not_found" {
				t.Fatalf("bob's feedback on alice's message: %d %s", r.Status, r.Body)
			}
		}
		if r := bob.Do("GET", fb, nil); r.Status != 404 {
			t.Fatalf("bob reads alice's feedback: %d %s", r.Status, r.Body)
		}
		for _, bad := range []string{"0", "-1", "abc", "99999999999999999999"} {
			if r := alice.Do("GET", "/api/chat/message/"+bad+"/feedback", nil); r.Status != 404 {
				t.Fatalf("message id %q: %d %s", bad, r.Status, r.Body)
			}
		}
		if got := alice.OK("GET", fb, nil)["feedback"].(map[string]any); got["rating"] != "like" {
			t.Fatalf("bob changed alice's feedback: %v", got)
		}
	})

	t.Run("state and viewed", func(t *testing.T) {
		st := alice.OK("GET", "/api/chat/thread/"+th+"/state?include_messages=true", nil)
		as := st["agent_state"].(map[string]any)
		if as["latest_run"].(map[string]any)["id"] != runID || len(as["messages"].([]any)) != 2 {
			t.Fatalf("state: %v", st)
		}
		if st["thread_status"] != "ready" {
			t.Fatalf("a finished, unseen run is ready: %v", st["thread_status"])
		}
		if r := bob.Do("POST", "/api/chat/thread/"+th+"/viewed", nil); r.Status != 404 {
			t.Fatalf("bob marks alice's thread viewed: %d %s", r.Status, r.Body)
		}
		if r := bob.Do("GET", "/api/chat/thread/"+th+"/state", nil); r.Status != 404 {
			t.Fatalf("bob reads alice's state: %d %s", r.Status, r.Body)
		}
		v := alice.OK("POST", "/api/chat/thread/"+th+"/viewed", nil)
		if v["thread_status"] != "done" || v["last_viewed_run_id"] != runID {
			t.Fatalf("viewed: %v", v)
		}
	})

	t.Run("search", func(t *testing.T) {
		res := alice.OK("GET", "/api/chat/threads/search?q=ZEBRA", nil)
		items := res["items"].([]any)
		if len(items) != 1 {
			t.Fatalf("search: %v", res)
		}
		it := items[0].(map[string]any)
		if it["thread_id"] != th || it["matched_count"].(float64) != 2 || !strings.Contains(fmt.Sprint(it["snippets"]), "zebra") {
			t.Fatalf("search item: %v", it)
		}
		if got := bob.OK("GET", "/api/chat/threads/search?q=zebra", nil)["items"].([]any); len(got) != 0 {
			t.Fatalf("bob finds alice's thread: %v", got)
		}
		// LIKE wildcards are literal.
		if got := alice.OK("GET", "/api/chat/threads/search?q=%25", nil)["items"].([]any); len(got) != 0 {
			t.Fatalf("%% matched: %v", got)
		}
		if r := alice.Do("GET", "/api/chat/threads/search", nil); r.Status != 422 {
			t.Fatalf("no q: %d", r.Status)
		}
	})

	t.Run("call", func(t *testing.T) {
		p.LLM.Enqueue(llmtest.Text("four"))
		got := alice.OK("POST", "/api/chat/call", map[string]any{"query": "2+2?", "meta": map[string]any{"request_id": "call-1"}})
		if got["response"] != "four" || got["request_id"] != "call-1" {
			t.Fatalf("call: %v", got)
		}
		if r := alice.Do("POST", "/api/chat/call", map[string]any{"query": " "}); r.Status != 422 {
			t.Fatalf("empty call: %d", r.Status)
		}
	})

	t.Run("image upload", func(t *testing.T) {
		// A transparent PNG comes back composited on white, as JPEG.
		img := image.NewNRGBA(image.Rect(0, 0, 3000, 1500))
		img.Set(0, 0, color.NRGBA{R: 255, A: 255})
		var buf bytes.Buffer
		if err := png.Encode(&buf, img); err != nil {
			t.Fatal(err)
		}
		r := alice.PostFile("/api/chat/image/upload", "clear.png", buf.Bytes())
		if r.Status != http.StatusOK {
			t.Fatalf("upload: %d %s", r.Status, r.Body)
		}
		up := r.JSON()
		if up["width"].(float64) != 2048 || up["height"].(float64) != 1024 || up["mime_type"] != "image/jpeg" || up["format"] != "png" {
			t.Fatalf("upload answer: %v", up)
		}
		data, _ := base64.StdEncoding.DecodeString(up["image_content"].(string))
		dec, err := jpeg.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if r, g, b, _ := dec.At(1000, 500).RGBA(); r>>8 < 250 || g>>8 < 250 || b>>8 < 250 {
			t.Fatalf("transparent pixel is not white: %d %d %d", r>>8, g>>8, b>>8)
		}
		if r := alice.PostFile("/api/chat/image/upload", "x.png", []byte("not an image")); r.Status != 415 || r.Code() != "unsupported_image" {
			t.Fatalf("not an image: %d %s", r.Status, r.Body)
		}
		big := append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 10<<20)...)
		if r := alice.PostFile("/api/chat/image/upload", "big.png", big); r.Status != 413 {
			t.Fatalf("too large: %d %s", r.Status, r.Body)
		}
		// A run references the image by id; another user cannot use it,
		// and it is used once.
		imageID := up["image_id"].(string)
		th2 := alice.Thread()
		if r := bob.Do("POST", "/api/agent/runs", map[string]any{"query": "look", "agent_slug": "default-chatbot", "thread_id": bob.Thread(),
			"meta": map[string]any{"image_id": imageID}}); r.Status != 404 || r.Code() != "image_not_found" {
			t.Fatalf("bob uses alice's image: %d %s", r.Status, r.Body)
		}
		p.LLM.Enqueue(llmtest.Text("a white picture"))
		sub := alice.Submit(th2, "what is this?", map[string]any{"meta": map[string]any{"image_id": imageID}})
		alice.Collect(sub["run_id"].(string), 20*time.Second)
		var found bool
		for _, m := range alice.OK("GET", "/api/chat/thread/"+th2+"/history", nil)["history"].([]any) {
			m := m.(map[string]any)
			if m["type"] == "human" && m["image_content"] == up["image_content"] {
				found = true
			}
		}
		if !found {
			t.Fatal("the message does not carry the uploaded image")
		}
		if r := alice.Do("POST", "/api/agent/runs", map[string]any{"query": "again", "agent_slug": "default-chatbot", "thread_id": alice.Thread(),
			"meta": map[string]any{"image_id": imageID}}); r.Status != 409 || r.Code() != "image_already_used" {
			t.Fatalf("image used twice: %d %s", r.Status, r.Body)
		}
	})

	t.Run("projects", func(t *testing.T) {
		pr := alice.OK("POST", "/api/projects", map[string]any{"name": "Research", "idempotency_key": "proj-1"})
		again := alice.OK("POST", "/api/projects", map[string]any{"name": "Research", "idempotency_key": "proj-1"})
		if pr["id"] != again["id"] || pr["workdir_path"] != "projects/"+pr["id"].(string) || pr["directory_mode"] != "managed" {
			t.Fatalf("project: %v / %v", pr, again)
		}
		if r := alice.Do("POST", "/api/projects", map[string]any{"name": "Other", "idempotency_key": "proj-1"}); r.Status != 409 {
			t.Fatalf("idempotency key reused: %d %s", r.Status, r.Body)
		}
		// Bob may use the same idempotency key: keys are per user.
		bob.OK("POST", "/api/projects", map[string]any{"name": "Bob's", "idempotency_key": "proj-1"})
		for _, body := range []map[string]any{{"name": "Host", "directory_mode": "linked", "workdir_path": "/etc"}, {"name": "Host", "workdir_path": "/"}} {
			if r := alice.Do("POST", "/api/projects", body); r.Status != 422 || r.Code() != "linked_project_unsupported" {
				t.Fatalf("linked project: %d %s", r.Status, r.Body)
			}
		}
		tp := alice.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "default-chatbot", "project_id": pr["id"]})
		if tp["project_id"] != pr["id"] || tp["workdir_path"] != pr["workdir_path"] {
			t.Fatalf("thread in project: %v", tp)
		}
		if r := bob.Do("POST", "/api/chat/thread", map[string]any{"agent_id": "default-chatbot", "project_id": pr["id"]}); r.Status != 404 || r.Code() != "project_not_found" {
			t.Fatalf("bob's thread in alice's project: %d %s", r.Status, r.Body)
		}
		list := alice.OK("GET", "/api/projects", nil)["projects"].([]any)
		if len(list) != 1 || list[0].(map[string]any)["thread_count"].(float64) != 1 {
			t.Fatalf("alice's projects: %v", list)
		}
		if got := bob.OK("GET", "/api/projects", nil)["projects"].([]any); len(got) != 1 || got[0].(map[string]any)["name"] != "Bob's" {
			t.Fatalf("bob's projects: %v", got)
		}
		cands := alice.OK("GET", "/api/projects/history-candidates", nil)["items"].([]any)
		if len(cands) < 2 || cands[0].(map[string]any)["project_id"] != pr["id"] {
			t.Fatalf("history candidates: %v", cands)
		}
		if got := bob.OK("GET", "/api/projects/history-candidates", nil)["items"].([]any); strings.Contains(fmt.Sprint(got), th) {
			t.Fatalf("bob's candidates show alice's thread: %v", got)
		}
	})
}

// The content guard on model output (issue 9): a keyword split across
// streamed tokens stops the stream and ends the run failed with
// content_guard_blocked, the stored answer replaced by the refusal; with LLM
// moderation on, the final answer is checked by the moderation model (the
// scripted OpenAI-compatible server here).
func TestContentGuardOnOutput(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	u := p.Admin.NewUser("guarded")
	p.Admin.OK("POST", "/api/system/config/update", map[string]any{"enable_content_guard": true, "content_guard_keywords": []string{"forbiddenword"}})

	result := func(query string, replies ...llmtest.Reply) (map[string]any, string) {
		th := u.Thread()
		p.LLM.Enqueue(replies...)
		runID := u.Submit(th, query, nil)["run_id"].(string)
		u.Collect(runID, 20*time.Second)
		res := u.OK("GET", "/api/agent/runs/"+runID+"/result", nil)
		var answer string
		for _, m := range u.OK("GET", "/api/chat/thread/"+th+"/history", nil)["history"].([]any) {
			if m := m.(map[string]any); m["type"] == "ai" {
				answer = m["content"].(string)
			}
		}
		return res, answer
	}
	blocked := func(what string, res map[string]any, answer string) {
		t.Helper()
		e, _ := res["error"].(map[string]any)
		if res["status"] != "failed" || e == nil || e["type"] != "content_guard_blocked" {
			t.Fatalf("%s: result %v", what, res)
		}
		if strings.Contains(answer, "forbidden") || !strings.Contains(answer, "内容安全") || res["output"] != answer {
			t.Fatalf("%s: stored answer %q, output %v", what, answer, res["output"])
		}
	}

	// Split across tokens, mid-word and in another case.
	res, answer := result("hello", llmtest.Text("here is the FORBID", "DENWORD you asked for", " and more"))
	blocked("split keyword", res, answer)
	// Clean output passes.
	if res, answer := result("hello", llmtest.Text("all ", "fine")); res["status"] != "completed" || answer != "all fine" {
		t.Fatalf("clean output: %v %q", res, answer)
	}

	// LLM moderation of the final answer: the moderation model flags it.
	p.Admin.OK("POST", "/api/system/config/update", map[string]any{"enable_content_guard_llm": true, "content_guard_llm_model": "fake:moderator"})
	var moderated []string
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		if req.Model == "moderator" {
			moderated = append(moderated, req.LastUserMessage())
			if strings.Contains(req.LastUserMessage(), "poison") {
				return llmtest.Text("UNSAFE")
			}
			return llmtest.Text("SAFE")
		}
		if strings.Contains(req.LastUserMessage(), "recipe") {
			return llmtest.Text("mix the poison ", "slowly")
		}
		return llmtest.Text("a harmless answer")
	})
	// Settings reach agent-step within the settings' staleness bound (1 s):
	// until then answers pass unmoderated.
	for deadline := time.Now().Add(10 * time.Second); ; {
		res, answer = result("a recipe please")
		if res["status"] == "failed" || time.Now().After(deadline) {
			break
		}
	}
	blocked("moderated answer", res, answer)
	if res, answer := result("something else"); res["status"] != "completed" || answer != "a harmless answer" {
		t.Fatalf("moderation passes a harmless answer: %v %q", res, answer)
	}
	if len(moderated) < 2 {
		t.Fatalf("the moderation model saw %d texts", len(moderated))
	}
}
