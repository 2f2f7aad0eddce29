package e2e

import (
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

func TestKnowledgeSmoke(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	c := p.Admin
	k := c.OK("POST", "/api/knowledge/databases", map[string]any{"database_name": "handbook", "description": "company handbook"})
	kbID := k["kb_id"].(string)
	files := c.Ingest(kbID, map[string][]byte{
		"vacation.md":  []byte("# Vacation policy\n\nEmployees get 25 days of paid vacation per year. Unused days expire in March.\n"),
		"expenses.txt": []byte("Expense reports are due within 30 days. Meals abroad are reimbursed up to 60 euros per day.\n"),
	}, 30*time.Second)
	for id, f := range files {
		t.Logf("%s: %v", id, f)
	}
	for _, mode := range []string{"vector", "keyword", "hybrid"} {
		r := c.Do("POST", "/api/knowledge/databases/"+kbID+"/query", map[string]any{"query": "how many vacation days", "meta": map[string]any{"search_mode": mode}})
		t.Logf("%s %d %s", mode, r.Status, r.Body)
	}
}
