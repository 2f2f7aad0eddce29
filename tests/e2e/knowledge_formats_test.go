package e2e

import (
	"bytes"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/docparse/docparsetest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// Ingestion of every supported document format through the real HTTP API:
// upload, add, parse, index; then each file is found by words that occur
// only in it, and its parsed Markdown shows the format's conversion rules.

const ingestWait = 30 * time.Second

// formatDoc is one file of the formats KB: query holds words that occur in
// no other file.
type formatDoc struct {
	name  string
	data  []byte
	query string
	modes []string // search modes checked besides keyword
	check func(t *testing.T, c *testkit.Client, kbID, fileID string, doc testkit.DocContent)
}

var (
	twoColLeft = []string{
		"The jackal survey opened this season",
		"along the dry riverbed in the south,",
		"where the teams counted dens at dusk",
		"and marked each one with a painted stake",
		"so that the second visit could find it.",
		"Most dens sat under acacia roots near",
		"the water holes that still held water",
		"when the first rains were late again.",
	}
	twoColRight = []string{
		"The kestrel counts came from towers",
		"set up at the edge of the grassland,",
		"where observers logged every bird that",
		"hovered over the plots for a minute",
		"or longer between nine and eleven.",
		"Counts rose after the grass was cut",
		"because prey was easier to spot there,",
		"as the towers' logs clearly showed.",
	}
	chartPNG = docparsetest.PNG()
)

func formatDocs() []formatDoc {
	return []formatDoc{
		{name: "notes.txt", data: []byte("Field notes from the aardvark quarantine station.\nThe aardvark pens are cleaned every Tuesday.\n"),
			query: "aardvark quarantine", modes: []string{"vector", "hybrid"},
			check: func(t *testing.T, _ *testkit.Client, _, _ string, doc testkit.DocContent) {
				wantText(t, doc.Content, "Field notes from the aardvark quarantine station.\nThe aardvark pens are cleaned every Tuesday.")
			}},
		{name: "guide.md", data: []byte("# Bluebonnet guide\n\nThe bluebonnet zeppelin tour leaves at dawn.\n"),
			query: "bluebonnet zeppelin",
			check: func(t *testing.T, _ *testkit.Client, _, _ string, doc testkit.DocContent) {
				wantText(t, doc.Content, "# Bluebonnet guide\n\nThe bluebonnet zeppelin tour leaves at dawn.")
			}},
		{name: "harbor.html", data: []byte(`<!DOCTYPE html><html><head><title>Harbor</title><style>p { color: crimson }</style></head>` +
			`<body><h1>Harbor Manual</h1><h2>Cormorant docking</h2><p>Cormorant moorings are assigned by the ` +
			`<a href="https://example.com/tides">tide tables</a>.</p><script>var secretToken = "x";</script></body></html>`),
			query: "cormorant moorings",
			check: func(t *testing.T, _ *testkit.Client, _, _ string, doc testkit.DocContent) {
				wantText(t, doc.Content, "# Harbor Manual", "## Cormorant docking", "[tide tables](https://example.com/tides)")
				for _, leaked := range []string{"<h1>", "<a href", "crimson", "secretToken"} {
					if strings.Contains(doc.Content, leaked) {
						t.Errorf("HTML Markdown keeps %q:\n%s", leaked, doc.Content)
					}
				}
			}},
		{name: "legacy.htm", data: []byte(`<html><body><h3>Dingo fences</h3><p>Dingo fence patrols run <b>weekly</b>.</p></body></html>`),
			query: "dingo patrols",
			check: func(t *testing.T, _ *testkit.Client, _, _ string, doc testkit.DocContent) {
				wantText(t, doc.Content, "### Dingo fences", "Dingo fence patrols run **weekly**.")
			}},
		{name: "caravans.docx", data: docparsetest.DOCX(
			docparsetest.Heading(1, "Dromedary caravans"),
			docparsetest.Paragraph("Dromedary caravans cross the erg in winter."),
			docparsetest.Table([]string{"Route", "Days"}, []string{"Erg crossing", "9"}),
		), query: "dromedary erg", modes: []string{"vector", "hybrid"},
			check: func(t *testing.T, _ *testkit.Client, _, _ string, doc testkit.DocContent) {
				wantText(t, doc.Content, "# Dromedary caravans\n\nDromedary caravans cross the erg in winter.\n\n| Route | Days |\n| --- | --- |\n| Erg crossing | 9 |")
			}},
		{name: "echidna.pptx", data: docparsetest.PPTX(
			docparsetest.Slide{Title: "Echidna roadmap", Lines: []string{"Echidna burrow sensors ship in May"}},
			docparsetest.Slide{Title: "Budget", Lines: []string{"Sensors cost less than planned"}},
		), query: "echidna burrow",
			check: func(t *testing.T, _ *testkit.Client, _, _ string, doc testkit.DocContent) {
				wantText(t, doc.Content, "## Slide 1\n\n### Echidna roadmap\n\n- Echidna burrow sensors ship in May\n\n## Slide 2\n\n### Budget")
			}},
		{name: "inventory.xlsx", data: docparsetest.XLSX(docparsetest.Sheet{Name: "Inventory",
			Rows: [][]string{{"Item", "Qty"}, {"Flamingo lanterns", "12"}, {"Gecko lamps", "4"}}}),
			query: "flamingo lanterns",
			check: func(t *testing.T, _ *testkit.Client, _, _ string, doc testkit.DocContent) {
				wantText(t, doc.Content, "## Inventory\n\n| Item | Qty |\n| --- | --- |\n| Flamingo lanterns | 12 |\n| Gecko lamps | 4 |")
			}},
		{name: "cities.csv", data: []byte("city,landmark\nGranada,gondola funicular\nHelsinki,icebreaker harbour\n"),
			query: "gondola funicular", modes: []string{"vector", "hybrid"},
			check: func(t *testing.T, _ *testkit.Client, _, _ string, doc testkit.DocContent) {
				// One table per data row, each repeating the header.
				want := "| city | landmark |\n| --- | --- |\n| Granada | gondola funicular |\n\n" +
					"| city | landmark |\n| --- | --- |\n| Helsinki | icebreaker harbour |"
				if strings.TrimSpace(doc.Content) != want {
					t.Errorf("CSV Markdown:\n%s\nwant:\n%s", doc.Content, want)
				}
			}},
		{name: "telemetry.json", data: []byte(`{"service":"hummingbird telemetry","regions":["iguazu"],"enabled":true}`),
			query: "hummingbird telemetry",
			check: func(t *testing.T, _ *testkit.Client, _, _ string, doc testkit.DocContent) {
				md := strings.TrimSpace(doc.Content)
				if !strings.HasPrefix(md, "```json\n") || !strings.HasSuffix(md, "\n```") {
					t.Errorf("JSON is not fenced:\n%s", md)
				}
				wantText(t, md, "{\n  \"service\": \"hummingbird telemetry\",\n  \"regions\": [\n    \"iguazu\"\n  ],\n  \"enabled\": true\n}")
			}},
		{name: "ibex.pdf", data: docparsetest.PDF(
			docparsetest.TextPage("Ibex migration report for the alpine valleys.", "Ibex herds crossed the glacier pass in June."),
			docparsetest.TextPage("The second page lists the observers."),
		), query: "ibex glacier", modes: []string{"vector", "hybrid"},
			check: func(t *testing.T, _ *testkit.Client, _, _ string, doc testkit.DocContent) {
				wantText(t, doc.Content, "<!-- page 1 -->\n\nIbex migration report for the alpine valleys.\nIbex herds crossed the glacier pass in June.\n\n"+
					"<!-- page 2 -->\n\nThe second page lists the observers.")
			}},
		{name: "survey.pdf", data: docparsetest.PDF(docparsetest.TwoColumnPage("Savanna Wildlife Survey of the Southern Plains", twoColLeft, twoColRight)),
			query: "jackal kestrel",
			check: func(t *testing.T, _ *testkit.Client, _, _ string, doc testkit.DocContent) {
				// Reading order: the title, the whole left column, then the
				// right one (a paragraph break between them is fine: the left
				// column's last line stops short).
				wantText(t, doc.Content, "Savanna Wildlife Survey of the Southern Plains\n\n"+strings.Join(twoColLeft, "\n"), strings.Join(twoColRight, "\n"))
				if i, j := strings.Index(doc.Content, twoColLeft[len(twoColLeft)-1]), strings.Index(doc.Content, twoColRight[0]); i < 0 || j < i {
					t.Errorf("the right column does not follow the left one:\n%s", doc.Content)
				}
			}},
		{name: "lemur.zip", data: docparsetest.MinerUBundle(
			"# Lemur survey\n\n![Population chart](images/lemur-chart.png)\n\nThe lemur census counted ringtail troops in every reserve.\n",
			map[string][]byte{"lemur-chart.png": chartPNG}),
			// Not vector alone: the chunk carries the image link, whose random
			// KB and file ids dilute the offline n-gram embedding run by run.
			query: "lemur ringtail", modes: []string{"hybrid"},
			check: checkBundleImage},
	}
}

// checkBundleImage: the bundle's image is stored and its link points at
// the authorised image route, which serves it to an admin and refuses a
// caller without a token.
func checkBundleImage(t *testing.T, c *testkit.Client, kbID, fileID string, doc testkit.DocContent) {
	m := regexp.MustCompile(`!\[Population chart\]\(([^)\s]+)\)`).FindStringSubmatch(doc.Content)
	if m == nil {
		t.Fatalf("no image link in the bundle's Markdown:\n%s", doc.Content)
	}
	link := m[1]
	prefix := "/api/knowledge/databases/" + kbID + "/images/kb/" + kbID + "/files/" + fileID + "/"
	if !strings.HasPrefix(link, prefix) || !strings.HasSuffix(link, "lemur-chart.png") {
		t.Fatalf("image link %q does not point at the KB image route (%s…)", link, prefix)
	}
	wantText(t, doc.Content, "The lemur census counted ringtail troops in every reserve.")
	r := c.Do("GET", link, nil)
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "image/png" || !bytes.Equal(r.Body, chartPNG) {
		t.Errorf("GET %s: %d %q, %d bytes (want the %d-byte PNG)", link, r.Status, r.Header.Get("Content-Type"), len(r.Body), len(chartPNG))
	}
	if r.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("image served without nosniff: %v", r.Header)
	}
	if r := c.As("").Do("GET", link, nil); r.Status != http.StatusUnauthorized || r.Code() == "" || bytes.Contains(r.Body, []byte("PNG")) {
		t.Errorf("GET %s without a token: %d %s", link, r.Status, r.Body)
	}
	if r := c.As("not-a-token").Do("GET", link, nil); r.Status != http.StatusUnauthorized {
		t.Errorf("GET %s with a bad token: %d %s", link, r.Status, r.Body)
	}
	// Only this KB's images: other paths under the route are refused.
	for _, path := range []string{"kb/kb_other/files/x/images/001-a.png", "kb/" + kbID + "/files/x/../../../kb_other/a.png"} {
		if r := c.Do("GET", "/api/knowledge/databases/"+kbID+"/images/"+path, nil); r.Status != http.StatusBadRequest || r.Code() != "invalid_image_path" {
			t.Errorf("image path %s: %d %s", path, r.Status, r.Body)
		}
	}
	if r := c.Do("GET", strings.TrimSuffix(link, ".png")+".gif", nil); r.Status != http.StatusNotFound || r.Code() != "image_not_found" {
		t.Errorf("a missing image: %d %s", r.Status, r.Body)
	}
}

func wantText(t *testing.T, got string, fragments ...string) {
	t.Helper()
	for _, f := range fragments {
		if !strings.Contains(got, f) {
			t.Errorf("Markdown does not contain %q:\n%s", f, got)
		}
	}
}

func TestKnowledgeFormats(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	c := p.Admin
	kbID := c.OK("POST", "/api/knowledge/databases", map[string]any{"database_name": "formats", "description": "one file per format"})["kb_id"].(string)
	watch := testkit.WatchKB(t, c, kbID)

	docs := formatDocs()
	items := make([]string, len(docs))
	for i, d := range docs {
		items[i] = c.UploadKB(kbID, d.name, d.data)
	}
	ids := c.AddDocuments(kbID, items, nil)
	for i, d := range docs {
		meta := c.WaitFile(kbID, ids[i], ingestWait, "indexed")
		if meta["chunk_count"].(float64) < 1 || meta["original_filename"] != d.name {
			t.Fatalf("%s indexed as %v", d.name, meta)
		}
	}
	contents := make([]testkit.DocContent, len(docs))
	for i := range docs {
		contents[i] = c.Content(kbID, ids[i])
	}
	// The queries' words must really be exclusive to their file, or the
	// ranking checks below prove nothing.
	for i, d := range docs {
		for j, other := range contents {
			for _, w := range strings.Fields(d.query) {
				if j != i && strings.Contains(strings.ToLower(other.Content), w) {
					t.Fatalf("query word %q of %s also occurs in %s", w, d.name, docs[j].name)
				}
			}
		}
	}

	// Format checks first (in parallel); the re-index and the staged files
	// below come after them.
	t.Run("formats", func(t *testing.T) {
		for i, d := range docs {
			t.Run(d.name, func(t *testing.T) {
				t.Parallel()
				c := c.For(t)
				doc := contents[i]
				if len(doc.Chunks) == 0 {
					t.Fatalf("no chunks for %s", d.name)
				}
				hits := c.Search(kbID, d.query, map[string]any{"search_mode": "keyword"})
				if len(hits) == 0 || hits[0]["file_id"] != ids[i] {
					t.Fatalf("keyword %q: top hit %v, want a chunk of %s (%s)", d.query, firstHit(hits), d.name, ids[i])
				}
				for _, h := range hits {
					if h["file_id"] != ids[i] {
						t.Errorf("keyword %q: a hit in %v, though only %s has these words", d.query, h["metadata"], d.name)
					}
					if !slices.Contains(doc.ChunkIDs(), h["id"].(string)) {
						t.Errorf("keyword hit %v is not a chunk of %s (%v)", h["id"], d.name, doc.ChunkIDs())
					}
				}
				if md := hits[0]["metadata"].(map[string]any); md["source"] != d.name || hits[0]["bm25_score"] == nil {
					t.Errorf("keyword hit metadata %v, bm25_score %v", md, hits[0]["bm25_score"])
				}
				for _, mode := range d.modes {
					hits := c.Search(kbID, d.query, map[string]any{"search_mode": mode})
					if len(hits) == 0 || hits[0]["file_id"] != ids[i] {
						t.Errorf("%s %q: top hit %v, want a chunk of %s", mode, d.query, firstHit(hits), d.name)
					}
				}
				d.check(t, c, kbID, ids[i], doc)
				// The status stream told each stage, in order.
				watch.Wait(t, ids[i], "indexed", 1, ingestWait)
				ingestNotices(t, d.name, watch.Statuses(ids[i]))
			})
		}
	})

	// Re-indexing unchanged content keeps every chunk id (chunks are
	// content-addressed) and goes through indexing again.
	t.Run("reindex keeps chunk ids", func(t *testing.T) {
		t.Parallel()
		c := c.For(t)
		id := ids[0]
		before := contents[0].ChunkIDs()
		r := c.OK("POST", "/api/knowledge/databases/"+kbID+"/documents/index", map[string]any{"file_ids": []string{id}})
		if item := r["items"].([]any)[0].(map[string]any); item["status"] != "parsed" || item["file_id"] != id {
			t.Fatalf("reindex answer: %v", r)
		}
		watch.Wait(t, id, "indexed", 2, ingestWait)
		meta := c.WaitFile(kbID, id, ingestWait, "indexed")
		after := c.Content(kbID, id).ChunkIDs()
		if !slices.Equal(before, after) || meta["chunk_count"].(float64) != float64(len(before)) {
			t.Errorf("chunk ids before %v, after re-index %v (meta %v)", before, after, meta)
		}
		if got := watch.Statuses(id); len(got) != 6 || !slices.Equal(got[4:], []string{"indexing", "indexed"}) {
			t.Errorf("status notices through the re-index: %v", got)
		} else {
			ingestNotices(t, "notes.txt", got[:4])
		}
	})

	// Each stage's status is visible between stages: added without
	// processing (uploaded), parsed without indexing (parsed: Markdown, no
	// chunks), then indexed on request.
	t.Run("status between stages", func(t *testing.T) {
		t.Parallel()
		c := c.For(t)
		item := c.UploadKB(kbID, "staged.md", []byte("# Staged\n\nThe walrus ledger is indexed only on request.\n"))
		added := c.OK("POST", "/api/knowledge/databases/"+kbID+"/documents/add", map[string]any{"items": []string{item}})
		id := added["items"].([]any)[0].(map[string]any)["file_id"].(string)
		if added["status"] != "success" || added["added"] != float64(1) {
			t.Errorf("add only: %v", added)
		}
		if meta := c.FileMeta(kbID, id); meta["status"] != "uploaded" || meta["chunk_count"].(float64) != 0 {
			t.Errorf("added file: %v", meta)
		}
		c.OK("POST", "/api/knowledge/databases/"+kbID+"/documents/parse", map[string]any{"file_ids": []string{id}})
		watch.Wait(t, id, "indexed", 1, ingestWait)

		item2 := c.UploadKB(kbID, "parsed-only.md", []byte("# Parsed only\n\nThe narwhal almanac waits for its index.\n"))
		id2 := c.AddDocuments(kbID, []string{item2}, map[string]any{"auto_index": false})[0]
		watch.Wait(t, id2, "parsed", 1, ingestWait)
		meta := c.WaitFile(kbID, id2, ingestWait, "parsed")
		doc := c.Content(kbID, id2)
		if meta["chunk_count"].(float64) != 0 || len(doc.Chunks) != 0 || !strings.Contains(doc.Content, "narwhal almanac") {
			t.Errorf("parsed, not indexed: meta %v, content %+v", meta, doc)
		}
		if hits := c.Search(kbID, "narwhal almanac", map[string]any{"search_mode": "keyword"}); len(hits) != 0 {
			t.Errorf("a file that is not indexed is found: %v", hits)
		}
		c.OK("POST", "/api/knowledge/databases/"+kbID+"/documents/index", map[string]any{"file_ids": []string{id2}})
		c.WaitFile(kbID, id2, ingestWait, "indexed")
		// The notice travels after the commit: wait for it, not only the row.
		watch.Wait(t, id2, "indexed", 1, ingestWait)
		if hits := c.Search(kbID, "narwhal almanac", map[string]any{"search_mode": "keyword"}); len(hits) == 0 || hits[0]["file_id"] != id2 {
			t.Errorf("after indexing: %v", hits)
		}
		if got := watch.Statuses(id2); !slices.Equal(got, []string{"parsing", "parsed", "indexing", "indexed"}) {
			t.Errorf("status notices of the staged file: %v", got)
		}
	})
}

// ingestNotices checks the notices of one ingestion: each status once,
// parsing first, indexing before indexed. doc-parse announces "parsed" after
// its commit, which races with kb-index announcing "indexing" for the event
// that commit released: those two come in either order (notices are hints;
// the file's status is the truth).
func ingestNotices(t *testing.T, name string, got []string) {
	t.Helper()
	sorted := slices.Sorted(slices.Values(got))
	if !slices.Equal(sorted, []string{"indexed", "indexing", "parsed", "parsing"}) || got[0] != "parsing" ||
		slices.Index(got, "indexing") > slices.Index(got, "indexed") {
		t.Errorf("status notices of %s: %v", name, got)
	}
}

func firstHit(hits []map[string]any) any {
	if len(hits) == 0 {
		return "none"
	}
	return hits[0]["metadata"]
}
