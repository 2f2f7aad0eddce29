package manifests

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// heavyPackages are packages a function should link only when its handler
// uses them: large to link and to initialise, or opening engines at start.
// A path also covers the packages under it.
var heavyPackages = []struct{ name, path string }{
	{"docparse", "/shared/docparse"}, // module-relative: the document parsers (PDF text layer, office formats, HTML)
	{"pdf", "github.com/ledongthuc/pdf"},
	{"html-to-markdown", "github.com/JohannesKaufmann/html-to-markdown"},
	{"kb", "/shared/kb"}, // the knowledge-base store, retriever and sweep (vector store, keyword index, embedders)
	{"minio", "github.com/minio/minio-go"},
	{"milvus", "github.com/milvus-io"},
	{"neo4j", "github.com/neo4j"},
	{"aws-sdk", "github.com/aws/aws-sdk-go-v2/service/eventbridge"},
	{"pubsub", "cloud.google.com/go/pubsub"},
	{"mcp-sdk", "github.com/modelcontextprotocol/go-sdk"}, // MCP client sessions
}

// functionLinks is what each function binary may link of heavyPackages —
// exactly: a package gained or lost changes this table in the same commit.
// Only doc-parse parses files, intake (POST /api/knowledge/files/markdown)
// and tool-invoke (the agent's ocr_parse_file, when a provisioner is configured);
// the dispatcher's file sweep purges vectors and objects of deleted knowledge
// bases, and tool-invoke runs the knowledge tools, so both open the knowledge
// engines; kb-graph opens them to read indexed files' chunks; agent-step only offers the tools' specs to the model; evaluate
// retrieves from knowledge bases. The MCP SDK: agent-step lists an MCP server's
// tools when it fixes a run's tool manifest, tool-invoke calls them, intake
// tests and lists servers. agent-step links the object-store package
// (minio) through shared/skill, whose run-time gate it uses (it reads only the
// skills index; a split of the gate from the file store would drop it).
//
// The Neo4j driver goes with the knowledge engines (shared/bootstrap/knowledge
// opens the graph engine YUXI_GRAPH_ENGINE names: retrieval's graph ranker,
// deletions' graph cleanup, the graph build); it connects only when chosen.
//
// Every function writes outbox rows and so relays them: each links the
// EventBridge/SQS and Pub/Sub publishers (shared/cloudbus), chosen at start
// by YUXI_RELAY. The clients are built only when chosen; a binary that never
// uses them pays their size and their packages' initialisation (measured by
// the cold-start bench).
var functionLinks = map[string][]string{
	"intake":      {"docparse", "pdf", "html-to-markdown", "kb", "neo4j", "minio", "aws-sdk", "pubsub", "mcp-sdk"},
	"doc-parse":   {"docparse", "pdf", "html-to-markdown", "kb", "neo4j", "minio", "aws-sdk", "pubsub"},
	"kb-index":    {"kb", "neo4j", "minio", "aws-sdk", "pubsub"},
	"kb-graph":    {"kb", "neo4j", "minio", "aws-sdk", "pubsub"},
	"dispatcher":  {"kb", "neo4j", "minio", "aws-sdk", "pubsub"},
	"tool-invoke": {"docparse", "pdf", "html-to-markdown", "kb", "neo4j", "minio", "aws-sdk", "pubsub", "mcp-sdk"},
	"agent-step":  {"minio", "aws-sdk", "pubsub", "mcp-sdk"},
	"evaluate":    {"kb", "neo4j", "minio", "aws-sdk", "pubsub"},
}

func TestFunctionsLinkOnlyWhatTheyUse(t *testing.T) {
	root := repoRoot(t)
	mod := modulePath(t, root)
	cmd := exec.Command("go", "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}} {{join .Deps " "}}{{end}}`, "./functions/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		fn := strings.TrimPrefix(fields[0], mod+"/functions/")
		seen[fn] = true
		want, ok := functionLinks[fn]
		if !ok {
			t.Errorf("functions/%s is not in functionLinks: say which heavy packages it may link", fn)
			continue
		}
		var got []string
		for _, h := range heavyPackages {
			p := h.path
			if strings.HasPrefix(p, "/") {
				p = mod + p
			}
			if slices.ContainsFunc(fields[1:], func(dep string) bool { return dep == p || strings.HasPrefix(dep, p+"/") }) {
				got = append(got, h.name)
			}
		}
		for _, g := range got {
			if !slices.Contains(want, g) {
				t.Errorf("functions/%s links %s (go list -deps ./functions/%s), which its handler does not use: compose its main from the openers it needs", fn, g, fn)
			}
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("functions/%s no longer links %s: remove it from functionLinks", fn, w)
			}
		}
	}
	for fn := range functionLinks {
		if !seen[fn] {
			t.Errorf("functionLinks names %s, which is not a function main", fn)
		}
	}
}

// TestHandlersHoldNoSQL: a function's handler package decodes, calls use cases
// in shared/ and encodes; SQL and transactions live in the domain packages.
// A handler package importing a PostgreSQL driver is the sign it grew some.
func TestHandlersHoldNoSQL(t *testing.T) {
	root := repoRoot(t)
	cmd := exec.Command("go", "list", "-f", `{{if ne .Name "main"}}{{.ImportPath}} {{join .Imports " "}}{{end}}`, "./functions/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	handlers := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		handlers++
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, "github.com/jackc/pgx") || imp == "database/sql" {
				t.Errorf("%s imports %s: move its SQL into the shared/ package that owns the table", fields[0], imp)
			}
		}
	}
	if handlers < 6 {
		t.Fatalf("found %d handler packages under functions/, expected one per function", handlers)
	}
}
