package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// The shortest walk of a knowledge base: create it, ingest two files, and
// find each by its content in every search mode.
func TestKnowledgeSmoke(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	c := p.Admin
	k := c.OK("POST", "/api/knowledge/databases", map[string]any{"database_name": "handbook", "description": "company handbook"})
	kbID, _ := k["kb_id"].(string)
	if kbID == "" || k["name"] != "handbook" {
		t.Fatalf("create: %v", k)
	}
	docs := map[string]string{
		"vacation.md":  "# Vacation policy\n\nEmployees get 25 days of paid vacation per year. Unused days expire in March.\n",
		"expenses.txt": "Expense reports are due within 30 days. Meals abroad are reimbursed up to 60 euros per day.\n",
	}
	files := c.Ingest(kbID, map[string][]byte{"vacation.md": []byte(docs["vacation.md"]), "expenses.txt": []byte(docs["expenses.txt"])}, 30*time.Second)
	if len(files) != len(docs) {
		t.Fatalf("ingested %d files, want %d: %v", len(files), len(docs), files)
	}
	idOf := map[string]string{}
	for id, f := range files {
		name, _ := f["original_filename"].(string)
		if _, ok := docs[name]; !ok || f["status"] != "indexed" {
			t.Fatalf("file %s: %v, want one of the two files indexed", id, f)
		}
		if n, _ := f["chunk_count"].(float64); n < 1 {
			t.Errorf("%s indexed with %v chunks", name, f["chunk_count"])
		}
		idOf[name] = id
	}
	for _, q := range []struct{ query, file, text string }{
		{"how many vacation days", "vacation.md", "25 days of paid vacation"},
		{"meals abroad reimbursed euros", "expenses.txt", "up to 60 euros per day"},
	} {
		for _, mode := range []string{"vector", "keyword", "hybrid"} {
			hits := c.Search(kbID, q.query, map[string]any{"search_mode": mode})
			if len(hits) == 0 {
				t.Errorf("%s search %q: no hits", mode, q.query)
				continue
			}
			top := hits[0]
			content, _ := top["content"].(string)
			meta, _ := top["metadata"].(map[string]any)
			if meta["file_id"] != idOf[q.file] || !strings.Contains(content, q.text) {
				t.Errorf("%s search %q: top hit %v, want %s with %q", mode, q.query, top, q.file, q.text)
			}
		}
	}
}
