package e2e

// The agent's knowledge-base tools, driven by a scripted model through real
// runs: query_kb results reach the model with kb_id, file_id and chunk ids,
// and the answer cites them; the tools see only the knowledge bases that are
// both enabled for the agent (context.knowledges) and readable by the run's
// user; find_kb_document, open_kb_document and search_file follow the
// original's argument schemas, line numbering and window semantics (spec §4.5).

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

const (
	kbVacationText = "# Vacation policy\n\nEmployees get 25 days of paid vacation per year.\nUnused days expire at the end of March.\n" + kbVacationRule + "\n"
	// kbVacationRule must reach the model verbatim: tool results are JSON
	// without HTML escaping (no \u003e for ">").
	kbVacationRule = "Carry-over needs a rating > 0.8 & fewer than <5> open days."
	kbExpensesText = "# Expenses\n\nExpense reports are due within 30 days.\nMeals abroad are reimbursed up to 60 euros per day.\n"
	kbSalariesText = "# Salaries\n\nThe salary bands are confidential and reviewed every April.\n"
	kbBudgetText   = "# Budget\n\nThe travel budget for the year is 120000 euros.\n"
)

// proceduresLines is a 30-line document whose lines 3, 5, 20 and 28 mention
// a needle (line n reads "line n" otherwise).
func proceduresLines() []string {
	marked := map[int]string{3: "a Needle here", 5: "NEEDLE again", 20: "needle 20", 28: "the needle 28"}
	ls := make([]string, 30)
	for i := range ls {
		ls[i] = fmt.Sprintf("line %d", i+1)
		if m, ok := marked[i+1]; ok {
			ls[i] = m
		}
	}
	return ls
}

// toolNumbered renders lines from..to (1-based, inclusive) as the tools do: "%6d\t<line>".
func toolNumbered(ls []string, from, to int) string {
	var out []string
	for n := from; n <= to; n++ {
		out = append(out, fmt.Sprintf("%6d\t%s", n, ls[n-1]))
	}
	return strings.Join(out, "\n")
}

// kbWorld is two readable knowledge bases, one private one, a plain user and
// her agent whose context enables the handbook and the private KB.
type kbWorld struct {
	p                            *testkit.Local
	admin, alice                 *testkit.Client
	handbook, finance, secret    string
	vacation, procedures, salary string // file ids
	vacationChunk                string // the chunk holding "25 days"
	agentSlug, allAgentSlug      string
}

func newKBWorld(t *testing.T) *kbWorld {
	t.Helper()
	p := testkit.StartLocal(t, nil)
	w := &kbWorld{p: p, admin: p.Admin}
	w.handbook = w.admin.NewKnowledgeBase("handbook", "company handbook", testkit.GlobalReadShare())
	w.finance = w.admin.NewKnowledgeBase("finance", "", testkit.GlobalReadShare())
	w.secret = w.admin.NewKnowledgeBase("secret", "board only", nil) // no share_config: private to its creator
	byName := func(files map[string]map[string]any, name string) string {
		for id, f := range files {
			if f["filename"] == name {
				if f["status"] != "indexed" {
					t.Fatalf("%s: %v", name, f)
				}
				return id
			}
		}
		t.Fatalf("no file %s in %v", name, files)
		return ""
	}
	hb := w.admin.Ingest(w.handbook, map[string][]byte{
		"vacation.md":   []byte(kbVacationText),
		"expenses.md":   []byte(kbExpensesText),
		"procedures.md": []byte(strings.Join(proceduresLines(), "\n") + "\n"),
	}, 30*time.Second)
	w.vacation, w.procedures = byName(hb, "vacation.md"), byName(hb, "procedures.md")
	w.salary = byName(w.admin.Ingest(w.secret, map[string][]byte{"salaries.md": []byte(kbSalariesText)}, 30*time.Second), "salaries.md")
	w.admin.Ingest(w.finance, map[string][]byte{"budget.md": []byte(kbBudgetText)}, 30*time.Second)
	if err := p.P.App.Pool.QueryRow(context.Background(), `SELECT chunk_id FROM knowledge_chunks WHERE file_id = $1 AND content LIKE '%25 days%'`,
		w.vacation).Scan(&w.vacationChunk); err != nil {
		t.Fatalf("vacation chunk: %v", err)
	}

	w.alice = w.admin.NewUser("alice")
	// The agent enables the handbook and the private KB (which alice cannot
	// read), not the finance KB (which she can).
	w.agentSlug = "kb-helper"
	w.alice.OK("POST", "/api/agent", map[string]any{"name": "KB helper", "slug": w.agentSlug,
		"config_json": map[string]any{"context": map[string]any{"knowledges": []string{w.handbook, w.secret}}}})
	// An agent that selects no knowledge base gets every one its user may read.
	w.allAgentSlug = "kb-all"
	w.alice.OK("POST", "/api/agent", map[string]any{"name": "KB all", "slug": w.allAgentSlug, "config_json": map[string]any{"context": map[string]any{}}})
	return w
}

// run submits query to agent as alice on a new thread, reads the whole
// stream and returns it with the run id.
func (w *kbWorld) run(t *testing.T, agent, query string) (string, []testkit.Event) {
	t.Helper()
	th := w.alice.OK("POST", "/api/chat/thread", map[string]any{"agent_id": agent, "title": "kb"})["id"].(string)
	in := w.alice.OK("POST", "/api/agent/runs", map[string]any{"query": query, "agent_slug": agent, "thread_id": th})
	runID, _ := in["run_id"].(string)
	if runID == "" {
		t.Fatalf("intake: %v", in)
	}
	return runID, w.alice.Collect(runID, 30*time.Second)
}

// modelRequestsFor returns the provider requests of the run whose last user
// message is query (the runs of a test share the scripted provider).
func modelRequestsFor(t *testing.T, p *testkit.Local, query string) []llmtest.ChatRequest {
	t.Helper()
	var out []llmtest.ChatRequest
	for _, r := range p.LLM.Requests() {
		if r.LastUserMessage() == query {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no model request for %q", query)
	}
	return out
}

func TestKnowledgeAgentQueriesAndCitesItsSource(t *testing.T) {
	t.Parallel()
	w := newKBWorld(t)
	const question = "How many vacation days do I get?"
	w.p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		last := req.Messages[len(req.Messages)-1]
		if last.Role != "tool" {
			return llmtest.Calls(llmtest.ToolCall{ID: "call_kb_1", Name: "query_kb",
				Arguments: fmt.Sprintf(`{"kb_id":%q,"query_text":"paid vacation days per year"}`, w.handbook)})
		}
		// Cite the passage that answers, from the tool result alone.
		var out struct {
			KBID    string `json:"kb_id"`
			Results []struct {
				ID       string         `json:"id"`
				KBID     string         `json:"kb_id"`
				FileID   string         `json:"file_id"`
				Content  string         `json:"content"`
				Metadata map[string]any `json:"metadata"`
			} `json:"results"`
		}
		if err := json.Unmarshal([]byte(last.Content), &out); err != nil {
			return llmtest.Text("unreadable tool result: " + last.Content)
		}
		for _, r := range out.Results {
			if strings.Contains(r.Content, "25 days") {
				return llmtest.Text("You get 25 days of paid vacation per year ",
					fmt.Sprintf("[source: %s, kb_id=%s, file_id=%s, chunk=%s].", r.Metadata["source"], r.KBID, r.FileID, r.ID))
			}
		}
		return llmtest.Text("not found in: " + last.Content)
	})
	runID, evs := w.run(t, w.agentSlug, question)
	want := fmt.Sprintf("You get 25 days of paid vacation per year [source: vacation.md, kb_id=%s, file_id=%s, chunk=%s].",
		w.handbook, w.vacation, w.vacationChunk)

	r := testkit.Render(evs)
	if r.Ends != 1 || r.EndStatus != "completed" {
		t.Fatalf("run %s: %+v", runID, r)
	}
	var texts []string
	for _, s := range r.Texts() {
		if s != "" {
			texts = append(texts, s)
		}
	}
	if len(texts) != 1 || texts[0] != want {
		t.Fatalf("rendered answer %q\nwant %q", texts, want)
	}
	if res := w.alice.OK("GET", "/api/agent/runs/"+runID+"/result", nil); res["status"] != "completed" || res["output"] != want {
		t.Errorf("result: %v", res)
	}

	// The model was offered the knowledge tools with their schemas.
	reqs := modelRequestsFor(t, w.p, question)
	if len(reqs) != 2 {
		t.Fatalf("model turns: %d, want 2", len(reqs))
	}
	offered := map[string]llmtest.Tool{}
	for _, tl := range reqs[0].Tools {
		offered[tl.Name] = tl
	}
	for _, name := range []string{"list_kbs", "query_kb", "find_kb_document", "open_kb_document", "search_file"} {
		if _, ok := offered[name]; !ok {
			t.Errorf("tool %s not offered to the model (offered %v)", name, offeredToolNames(reqs[0].Tools))
		}
	}
	var schema struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(offered["query_kb"].Parameters, &schema); err != nil || !slices.Equal(sortedStrings(schema.Required), []string{"kb_id", "query_text"}) ||
		schema.Properties["file_name"] == nil {
		t.Errorf("query_kb schema: %s", offered["query_kb"].Parameters)
	}

	// The tool result the model read: SearchOutputSchema with the right chunk.
	res := testkit.ToolMessages(reqs[1])["call_kb_1"]
	if !strings.Contains(res, kbVacationRule) || strings.Contains(res, `\u003`) || strings.Contains(res, `\u0026`) {
		t.Errorf("the passage with <, > and & did not reach the model verbatim: %s", res)
	}
	if strings.Contains(res, "\n  ") || strings.HasSuffix(res, "\n") {
		t.Errorf("tool result is not compact JSON: %q", res)
	}
	var out struct {
		KBID    string           `json:"kb_id"`
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal([]byte(res), &out); err != nil {
		t.Fatalf("query_kb result is not SearchOutputSchema JSON: %v: %s", err, res)
	}
	if out.KBID != w.handbook || len(out.Results) == 0 {
		t.Fatalf("query_kb result: %s", res)
	}
	top := out.Results[0]
	md, _ := top["metadata"].(map[string]any)
	if top["id"] != w.vacationChunk || top["kb_id"] != w.handbook || top["file_id"] != w.vacation ||
		!strings.Contains(top["content"].(string), "25 days of paid vacation") {
		t.Errorf("top result is not the vacation chunk: %v", top)
	}
	if md["source"] != "vacation.md" || md["chunk_id"] != w.vacationChunk || md["file_id"] != w.vacation || md["chunk_index"] == nil || md["score"] == nil {
		t.Errorf("top result metadata: %v", md)
	}
	for _, r := range out.Results {
		if r["kb_id"] != w.handbook {
			t.Errorf("result from another knowledge base: %v", r)
		}
		m, _ := r["metadata"].(map[string]any)
		for _, k := range []string{"path", "filepath", "object_key", "parsed_path", "markdown_file"} {
			if _, ok := m[k]; ok {
				t.Errorf("result metadata exposes %s: %v", k, m)
			}
		}
	}

	// The stream announced the call and its result.
	if calls := testkit.StreamedToolCalls(evs); calls["call_kb_1"] != "query_kb" {
		t.Errorf("streamed tool calls: %v", calls)
	}
	var finished []testkit.ToolEvent
	for _, e := range testkit.ToolEvents(evs) {
		if e.Kind == "tool-finished" {
			finished = append(finished, e)
		}
	}
	if len(finished) != 1 || finished[0].ToolCallID != "call_kb_1" || finished[0].ToolName != "query_kb" ||
		!strings.Contains(finished[0].Output, w.vacationChunk) || finished[0].Error != "" {
		t.Errorf("tool events: %+v", finished)
	}
	// The history keeps the call with its status.
	var status, output string
	if err := w.p.P.App.Pool.QueryRow(context.Background(), `SELECT status, coalesce(tool_output, '') FROM tool_calls WHERE run_id = $1 AND tool_call_id = 'call_kb_1'`,
		runID).Scan(&status, &output); err != nil || status != "success" || !strings.Contains(output, w.vacationChunk) {
		t.Errorf("tool call row: %s %q %v", status, output, err)
	}
}

func offeredToolNames(ts []llmtest.Tool) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

func sortedStrings(s []string) []string {
	c := slices.Clone(s)
	sort.Strings(c)
	return c
}

// scriptedToolCall is a scripted call and the check of what the model read back.
type scriptedToolCall struct {
	name, args string
	check      func(t *testing.T, out string)
}

// runTools has the model make every call in one turn, then answer; it
// returns call id → the tool message the model read.
func (w *kbWorld) runTools(t *testing.T, agent, query string, calls map[string]scriptedToolCall) map[string]string {
	t.Helper()
	ids := make([]string, 0, len(calls))
	for id := range calls {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	w.p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		if req.Messages[len(req.Messages)-1].Role == "tool" {
			return llmtest.Text("done")
		}
		var tcs []llmtest.ToolCall
		for _, id := range ids {
			tcs = append(tcs, llmtest.ToolCall{ID: id, Name: calls[id].name, Arguments: calls[id].args})
		}
		return llmtest.Calls(tcs...)
	})
	runID, evs := w.run(t, agent, query)
	if r := testkit.Render(evs); r.EndStatus != "completed" {
		t.Fatalf("run %s: %+v", runID, r)
	}
	reqs := modelRequestsFor(t, w.p, query)
	results := testkit.ToolMessages(reqs[len(reqs)-1])
	for _, id := range ids {
		out, ok := results[id]
		if !ok {
			t.Errorf("%s (%s): no tool result reached the model", id, calls[id].name)
			continue
		}
		t.Run(id, func(t *testing.T) { calls[id].check(t, out) })
	}
	return results
}

// toolRefused checks a refused call: an error the model can read, mentioning want.
func toolRefused(want string) func(t *testing.T, out string) {
	return func(t *testing.T, out string) {
		t.Helper()
		if !strings.HasPrefix(out, "Error: ") || !strings.Contains(out, want) {
			t.Errorf("want an error mentioning %q, got %s", want, out)
		}
	}
}

// toolDecoded decodes a tool result into v and runs check.
func toolDecoded[T any](check func(t *testing.T, v T)) func(t *testing.T, out string) {
	return func(t *testing.T, out string) {
		t.Helper()
		var v T
		dec := json.NewDecoder(strings.NewReader(out))
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("result is not the expected JSON: %v: %s", err, out)
		}
		check(t, v)
	}
}

type openWindowOut struct {
	KBID          string `json:"kb_id"`
	FileID        string `json:"file_id"`
	StartLine     int    `json:"start_line"`
	EndLine       int    `json:"end_line"`
	TotalLines    int    `json:"total_lines"`
	Offset        int    `json:"offset"`
	WindowSize    int    `json:"window_size"`
	HasMoreBefore bool   `json:"has_more_before"`
	HasMoreAfter  bool   `json:"has_more_after"`
	NextOffset    *int   `json:"next_offset"`
	Content       string `json:"content"`
}

func nullableInt(p *int) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

type findWindowsOut struct {
	KBID         string `json:"kb_id"`
	FileID       string `json:"file_id"`
	Semantic     bool   `json:"semantic"`
	MatchMode    string `json:"match_mode"`
	TotalMatches int    `json:"total_matches"`
	Windows      []struct {
		StartLine    int    `json:"start_line"`
		EndLine      int    `json:"end_line"`
		MatchedLines []int  `json:"matched_lines"`
		Content      string `json:"content"`
	} `json:"windows"`
}

func TestKnowledgeToolsScopeAndDocumentWindows(t *testing.T) {
	t.Parallel()
	w := newKBWorld(t)
	ls := proceduresLines()
	intp := func(i int) *int { return &i }
	checkOpen := func(start, end, offset, window int, before, after bool, next *int) func(t *testing.T, out string) {
		return toolDecoded(func(t *testing.T, o openWindowOut) {
			want := openWindowOut{KBID: w.handbook, FileID: w.procedures, StartLine: start, EndLine: end, TotalLines: len(ls), Offset: offset,
				WindowSize: window, HasMoreBefore: before, HasMoreAfter: after, NextOffset: next, Content: toolNumbered(ls, start, end)}
			if (o.NextOffset == nil) != (want.NextOffset == nil) || (o.NextOffset != nil && *o.NextOffset != *want.NextOffset) {
				t.Errorf("next_offset %s, want %s", nullableInt(o.NextOffset), nullableInt(want.NextOffset))
			}
			o.NextOffset, want.NextOffset = nil, nil
			if o != want {
				t.Errorf("open window:\n got %+v\nwant %+v", o, want)
			}
		})
	}
	type win struct {
		start, end int
		matched    []int
	}
	checkFind := func(mode string, total int, wins []win) func(t *testing.T, out string) {
		return toolDecoded(func(t *testing.T, f findWindowsOut) {
			if f.KBID != w.handbook || f.FileID != w.procedures || f.Semantic || f.MatchMode != mode || f.TotalMatches != total || len(f.Windows) != len(wins) {
				t.Fatalf("find: %+v", f)
			}
			for i, want := range wins {
				got := f.Windows[i]
				if got.StartLine != want.start || got.EndLine != want.end || !slices.Equal(got.MatchedLines, want.matched) ||
					got.Content != toolNumbered(ls, want.start, want.end) {
					t.Errorf("window %d: %+v, want %d–%d %v", i, got, want.start, want.end, want.matched)
				}
			}
		})
	}
	a := func(format string, args ...any) string { return fmt.Sprintf(format, args...) }

	w.runTools(t, w.agentSlug, "use the knowledge tools", map[string]scriptedToolCall{
		// list_kbs: enabled ∩ readable — the handbook only (secret is not
		// readable by alice, finance is not enabled for the agent).
		"c01_list": {"list_kbs", `{}`, toolDecoded(func(t *testing.T, kbs []map[string]string) {
			if len(kbs) != 1 || kbs[0]["kb_id"] != w.handbook || kbs[0]["name"] != "handbook" || kbs[0]["description"] != "company handbook" {
				t.Errorf("list_kbs: %v", kbs)
			}
		})},
		"c02_list_dummy": {"list_kbs", `{"dummy":"x"}`, toolDecoded(func(t *testing.T, kbs []map[string]string) {
			if len(kbs) != 1 || kbs[0]["kb_id"] != w.handbook {
				t.Errorf("list_kbs with dummy: %v", kbs)
			}
		})},
		// Named in the agent's context but not readable by the run's user.
		"c03_query_secret":  {"query_kb", a(`{"kb_id":%q,"query_text":"salary bands"}`, w.secret), toolRefused(w.secret)},
		"c04_find_secret":   {"find_kb_document", a(`{"kb_id":%q,"file_id":%q,"patterns":["salary"]}`, w.secret, w.salary), toolRefused(w.secret)},
		"c05_open_secret":   {"open_kb_document", a(`{"kb_id":%q,"file_id":%q}`, w.secret, w.salary), toolRefused(w.secret)},
		"c06_search_secret": {"search_file", `{"kb_name":"secret"}`, toolRefused("secret")},
		// Readable but not enabled for the agent.
		"c07_query_finance": {"query_kb", a(`{"kb_id":%q,"query_text":"travel budget"}`, w.finance), toolRefused(w.finance)},
		// A file of another KB, reached through an enabled one.
		"c08_open_foreign_file": {"open_kb_document", a(`{"kb_id":%q,"file_id":%q}`, w.handbook, w.salary), toolRefused(w.salary)},
		"c09_query_bad_args":    {"query_kb", a(`{"kb_id":%q,"query":"x"}`, w.handbook), toolRefused("invalid arguments")},
		// query_kb with file_name searches only the matching files.
		"c10_query_file_name": {"query_kb", a(`{"kb_id":%q,"query_text":"days","file_name":"expenses"}`, w.handbook),
			toolDecoded(func(t *testing.T, o struct {
				KBID    string           `json:"kb_id"`
				Results []map[string]any `json:"results"`
			}) {
				if o.KBID != w.handbook || len(o.Results) == 0 {
					t.Fatalf("query_kb with file_name: %+v", o)
				}
				for _, r := range o.Results {
					if r["metadata"].(map[string]any)["source"] != "expenses.md" {
						t.Errorf("file_name filter let through %v", r)
					}
				}
			})},

		// open_kb_document: toolNumbered lines "%6d\t<line>", line (1-based) wins over offset (0-based).
		"c11_open_default": {"open_kb_document", a(`{"kb_id":%q,"file_id":%q}`, w.handbook, w.procedures),
			checkOpen(1, 30, 0, 1800, false, false, nil)},
		"c12_open_line": {"open_kb_document", a(`{"kb_id":%q,"file_id":%q,"line":5,"window_size":3}`, w.handbook, w.procedures),
			checkOpen(5, 7, 4, 3, true, true, intp(7))},
		"c13_open_line_wins": {"open_kb_document", a(`{"kb_id":%q,"file_id":%q,"line":10,"offset":2,"window_size":2}`, w.handbook, w.procedures),
			checkOpen(10, 11, 9, 2, true, true, intp(11))},
		"c14_open_offset": {"open_kb_document", a(`{"kb_id":%q,"file_id":%q,"offset":0,"window_size":5}`, w.handbook, w.procedures),
			checkOpen(1, 5, 0, 5, false, true, intp(5))},
		"c15_open_tail": {"open_kb_document", a(`{"kb_id":%q,"file_id":%q,"offset":28,"window_size":5}`, w.handbook, w.procedures),
			checkOpen(29, 30, 28, 5, true, false, nil)},
		"c16_open_window_too_big": {"open_kb_document", a(`{"kb_id":%q,"file_id":%q,"window_size":2001}`, w.handbook, w.procedures), toolRefused("window_size")},

		// find_kb_document: windows of window_size lines with half of them
		// before the first match, not overlapping; total_matches counts lines.
		"c17_find_keyword": {"find_kb_document", a(`{"kb_id":%q,"file_id":%q,"patterns":["needle"],"window_size":6}`, w.handbook, w.procedures),
			checkFind("keyword", 4, []win{{1, 6, []int{3, 5}}, {17, 22, []int{20}}, {25, 30, []int{28}}})},
		"c18_find_max_windows": {"find_kb_document", a(`{"kb_id":%q,"file_id":%q,"patterns":["needle"],"window_size":6,"max_windows":1}`, w.handbook, w.procedures),
			checkFind("keyword", 4, []win{{1, 6, []int{3, 5}}})},
		"c19_find_case": {"find_kb_document", a(`{"kb_id":%q,"file_id":%q,"patterns":["NEEDLE"],"case_sensitive":true,"window_size":1}`, w.handbook, w.procedures),
			checkFind("keyword", 1, []win{{5, 5, []int{5}}})},
		"c20_find_regex": {"find_kb_document", a(`{"kb_id":%q,"file_id":%q,"patterns":["^needle \\d+$"],"use_regex":true,"window_size":1}`, w.handbook, w.procedures),
			checkFind("regex", 1, []win{{20, 20, []int{20}}})},
		"c21_find_defaults": {"find_kb_document", a(`{"kb_id":%q,"file_id":%q,"patterns":["needle"]}`, w.handbook, w.procedures),
			checkFind("keyword", 4, []win{{1, 30, []int{3, 5, 20, 28}}})},
		"c22_find_no_patterns": {"find_kb_document", a(`{"kb_id":%q,"file_id":%q,"patterns":[]}`, w.handbook, w.procedures), toolRefused("pattern")},

		// search_file: by file name across the conversation's KBs.
		"c23_search_query": {"search_file", `{"query":"VACATION"}`, toolDecoded(func(t *testing.T, o struct {
			Files   []map[string]any `json:"files"`
			Total   int              `json:"total"`
			Offset  int              `json:"offset"`
			Limit   int              `json:"limit"`
			HasMore bool             `json:"has_more"`
		}) {
			if len(o.Files) != 1 || o.Total != 1 || o.Offset != 0 || o.Limit != 300 || o.HasMore {
				t.Fatalf("search_file: %+v", o)
			}
			f := o.Files[0]
			for _, k := range []string{"kb_id", "kb_name", "file_id", "filename", "file_type", "status", "created_at", "updated_at", "file_size"} {
				if _, ok := f[k]; !ok {
					t.Errorf("search_file result lacks %s: %v", k, f)
				}
			}
			if f["kb_id"] != w.handbook || f["kb_name"] != "handbook" || f["file_id"] != w.vacation || f["filename"] != "vacation.md" ||
				f["file_type"] != "md" || f["status"] != "indexed" || f["file_size"].(float64) != float64(len(kbVacationText)) {
				t.Errorf("search_file file: %v", f)
			}
		})},
		"c24_search_kb_paged": {"search_file", `{"kb_name":"handbook","limit":2,"offset":1}`, toolDecoded(func(t *testing.T, o struct {
			Files   []map[string]any `json:"files"`
			Total   int              `json:"total"`
			Offset  int              `json:"offset"`
			Limit   int              `json:"limit"`
			HasMore bool             `json:"has_more"`
		}) {
			if len(o.Files) != 2 || o.Total != 3 || o.Offset != 1 || o.Limit != 2 || o.HasMore {
				t.Errorf("search_file page: %+v", o)
			}
		})},
		"c25_search_nothing": {"search_file", `{}`, toolRefused("kb_name")},
		"c26_search_finance": {"search_file", `{"query":"budget"}`, toolDecoded(func(t *testing.T, o struct {
			Files []map[string]any `json:"files"`
			Total int              `json:"total"`
		}) {
			if len(o.Files) != 0 || o.Total != 0 {
				t.Errorf("search_file reached a KB not enabled for the agent: %+v", o)
			}
		})},
	})

	// An agent that selects no knowledge base sees every one alice may read.
	w.runTools(t, w.allAgentSlug, "list everything", map[string]scriptedToolCall{
		"d1_list": {"list_kbs", `{}`, toolDecoded(func(t *testing.T, kbs []map[string]string) {
			var ids []string
			for _, k := range kbs {
				ids = append(ids, k["kb_id"])
				if k["kb_id"] == w.finance && k["description"] != "无描述" {
					t.Errorf("an empty description lists as 无描述, got %q", k["description"])
				}
			}
			if !slices.Equal(sortedStrings(ids), sortedStrings([]string{w.handbook, w.finance})) {
				t.Errorf("list_kbs for an agent without a selection: %v", kbs)
			}
		})},
		"d2_query_finance": {"query_kb", a(`{"kb_id":%q,"query_text":"travel budget"}`, w.finance), func(t *testing.T, out string) {
			if !strings.Contains(out, "120000 euros") {
				t.Errorf("query_kb on a readable KB: %s", out)
			}
		}},
		"d3_query_secret": {"query_kb", a(`{"kb_id":%q,"query_text":"salary"}`, w.secret), toolRefused(w.secret)},
	})

	// Access is checked at the call, not at submission: revoked while the
	// model decides (the handbook becomes private to its creator), the
	// handbook is refused within the same run.
	const late = "search after the revocation"
	w.p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		if req.Messages[len(req.Messages)-1].Role == "tool" {
			return llmtest.Text("done")
		}
		if r, err := w.admin.TryDo("PUT", "/api/knowledge/databases/"+w.handbook, map[string]any{"share_config": nil}); err != nil || r.Status != 200 {
			return llmtest.Text(fmt.Sprintf("revocation failed: %v %s", err, r.Body))
		}
		return llmtest.Calls(
			llmtest.ToolCall{ID: "e1_list", Name: "list_kbs", Arguments: `{}`},
			llmtest.ToolCall{ID: "e2_query", Name: "query_kb", Arguments: a(`{"kb_id":%q,"query_text":"vacation"}`, w.handbook)},
		)
	})
	if _, evs := w.run(t, w.agentSlug, late); testkit.Render(evs).EndStatus != "completed" {
		t.Fatalf("run after the revocation did not complete")
	}
	reqs := modelRequestsFor(t, w.p, late)
	got := testkit.ToolMessages(reqs[len(reqs)-1])
	// Nothing is visible any more: an empty list (the original answers with
	// a message instead), never the handbook.
	if l := got["e1_list"]; l == "" || strings.Contains(l, w.handbook) || strings.HasPrefix(l, "Error: ") {
		t.Errorf("list_kbs after the revocation: %q", l)
	}
	toolRefused(w.handbook)(t, got["e2_query"])
}

func TestKnowledgeToolsAreRegistered(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	user := p.Admin.NewUser("bob")
	type listing struct {
		Slug        string          `json:"slug"`
		Name        string          `json:"name"`
		DisplayName string          `json:"display_name"`
		Category    string          `json:"category"`
		Tags        []string        `json:"tags"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	var out struct {
		Success bool      `json:"success"`
		Data    []listing `json:"data"`
	}
	user.Do("GET", "/api/system/tools", nil).Decode(t, &out)
	found := map[string]bool{}
	for _, tl := range out.Data {
		switch tl.Slug {
		case "list_kbs", "query_kb", "find_kb_document", "open_kb_document", "search_file", "download_kb_file":
			found[tl.Slug] = true
			var schema map[string]any
			if tl.Category != "knowledge" || tl.Name == "" || tl.Name == tl.Slug || tl.DisplayName != tl.Name || tl.Description == "" ||
				json.Unmarshal(tl.Parameters, &schema) != nil || schema["type"] != "object" {
				t.Errorf("tool %s: %+v", tl.Name, tl)
			}
		}
	}
	if len(found) != 6 || !out.Success {
		t.Errorf("knowledge tools listed: %v", found)
	}
	// ?category filters; options are {label: display name, value: slug}.
	var kbOnly struct{ Data []listing }
	user.Do("GET", "/api/system/tools?category=knowledge", nil).Decode(t, &kbOnly)
	if len(kbOnly.Data) != 7 {
		t.Errorf("category=knowledge: %+v", kbOnly.Data)
	}
	for _, tl := range kbOnly.Data {
		if tl.Category != "knowledge" {
			t.Errorf("category filter let %s (%s) through", tl.Slug, tl.Category)
		}
	}
	var opts struct {
		Data []struct{ Label, Value string }
	}
	user.Do("GET", "/api/system/tools/options", nil).Decode(t, &opts)
	labels := map[string]string{}
	for _, o := range opts.Data {
		labels[o.Value] = o.Label
	}
	for _, tl := range out.Data {
		if labels[tl.Slug] != tl.Name {
			t.Errorf("option for %s: %q, want %q", tl.Slug, labels[tl.Slug], tl.Name)
		}
	}
	if len(opts.Data) != len(out.Data) || labels["ask_user_question"] == "" {
		t.Errorf("options %v vs %d tools", opts.Data, len(out.Data))
	}
}
