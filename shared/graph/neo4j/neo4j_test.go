package neo4j_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/graph"
	"github.com/yuxi-serverless/yuxi/shared/graph/graphtest"
	"github.com/yuxi-serverless/yuxi/shared/graph/neo4j"
)

// TestNeo4jContract runs the Postgres engine's contract suite against a real
// Neo4j when NEO4J_URI is set (bolt://127.0.0.1:7687; NEO4J_USERNAME,
// NEO4J_PASSWORD). No Neo4j runs in CI, so it is skipped there, visibly.
func TestNeo4jContract(t *testing.T) {
	uri := os.Getenv("NEO4J_URI")
	if uri == "" {
		t.Skip("NEO4J_URI not set: the Neo4j engine's contract runs only against a real Neo4j server (the Bolt-stub tests run here)")
	}
	graphtest.Run(t, func(t *testing.T) graph.Engine {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		e, err := neo4j.Open(ctx, neo4j.Config{URI: uri, Username: os.Getenv("NEO4J_USERNAME"), Password: os.Getenv("NEO4J_PASSWORD"),
			Namespace: "test_" + hex.EncodeToString(b) + ":"})
		if err != nil {
			t.Fatalf("connect to Neo4j at %s: %v", uri, err)
		}
		t.Cleanup(func() { _ = e.Close(context.Background()) })
		return e
	})
}

var v54 = []version{{5, 4}}

func schemaSteps() []step {
	var out []step
	for _, name := range []string{"CREATE CONSTRAINT yuxi_entity_key", "CREATE CONSTRAINT yuxi_chunk_key", "CREATE CONSTRAINT yuxi_graph_lock",
		"CREATE INDEX yuxi_chunk_file", "CREATE INDEX yuxi_entity_name"} {
		out = append(out, step{contains: []string{name, "IF NOT EXISTS"}})
	}
	return out
}

func lock(kb string) step {
	return step{contains: []string{"MERGE (l:GraphLock {kb_id: $kb})"}, params: map[string]any{"kb": kb}}
}

func script(parts ...any) []step {
	out := schemaSteps()
	for _, p := range parts {
		switch x := p.(type) {
		case step:
			out = append(out, x)
		case []step:
			out = append(out, x...)
		}
	}
	return out
}

func openStub(t *testing.T, s *boltStub) *neo4j.Engine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e, err := neo4j.Open(ctx, neo4j.Config{URI: s.uri(), Username: "neo4j", Password: "secret"})
	if err != nil {
		t.Fatalf("Open against the Bolt stub: %v", err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}

func person(name string) graph.Entity {
	return graph.Entity{ID: graph.EntityID(name, "Person"), Name: name, Label: "Person"}
}

func entityRow(e graph.Entity) map[string]any {
	return map[string]any{"id": e.ID, "name": e.Name, "name_lower": strings.ToLower(e.Name), "label": e.Label, "description": e.Description}
}

func entityRecord(e graph.Entity) []any { return []any{e.ID, e.Name, e.Label, e.Description} }

var entityFields = []string{"id", "name", "label", "description"}

func rel(src, typ, dst string) graph.Relation {
	s, d := graph.EntityID(src, "Person"), graph.EntityID(dst, "Person")
	return graph.Relation{ID: graph.RelationID(s, typ, d), Source: s, Target: d, Type: typ}
}

func relRow(r graph.Relation, chunk string) map[string]any {
	return map[string]any{"id": r.ID, "source": r.Source, "target": r.Target, "type": r.Type, "description": r.Description, "chunk": chunk}
}

func mention(chunk, file, name string) map[string]any {
	return map[string]any{"chunk": chunk, "file": file, "entity": graph.EntityID(name, "Person")}
}

func ids(names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = graph.EntityID(n, "Person")
	}
	return out
}

func unmentionSteps(kb string, chunks []string, mentioned []string) []step {
	recs := make([][]any, len(mentioned))
	for i, id := range mentioned {
		recs[i] = []any{id}
	}
	return []step{
		{contains: []string{"UNWIND $chunks AS cid", "-[r:RELATION]->", "SET r.chunks = [x IN r.chunks WHERE x <> cid]"}, params: map[string]any{"kb": kb, "chunks": chunks}},
		{contains: []string{"UNWIND $chunks AS cid", "MATCH (c:Chunk {kb_id: $kb, id: cid})", "DETACH DELETE c"}, params: map[string]any{"kb": kb, "chunks": chunks}, fields: []string{"id"}, records: recs},
	}
}

func collectStep(kb string, entities []string) step {
	return step{contains: []string{"UNWIND $entities AS eid", "WHERE size(r.chunks) = 0", "NOT EXISTS { MATCH (:Chunk)-[:MENTIONS]->(e) }", "DETACH DELETE e"},
		params: map[string]any{"kb": kb, "entities": entities}}
}

// The contract's DeleteFileKeepsSharedEntities, as the statements the engine
// sends and the answers a server holding that graph gives.
func TestBoltDeleteFileKeepsSharedEntities(t *testing.T) {
	t.Parallel()
	c1 := graphtest.Chunk("f1_a", "f1", nil, [3]string{"Alice", "knows", "Bob"})
	c2 := graphtest.Chunk("f1_b", "f1", nil, [3]string{"Bob", "knows", "Carol"})
	c3 := graphtest.Chunk("f2_a", "f2", nil, [3]string{"Bob", "knows", "Carol"}, [3]string{"Carol", "likes", "Dave"})
	alice, bob, carol, dave := person("Alice"), person("Bob"), person("Carol"), person("Dave")
	all := []string{"f1_a", "f1_b", "f2_a"}
	s := newBoltStub(t, v54, script(
		// WriteChunks: one transaction, one statement per kind of row.
		lock("kb"), unmentionSteps("kb", all, nil),
		step{contains: []string{"UNWIND $entities AS row", "MERGE (e:Entity {kb_id: $kb, id: row.id})"},
			params: map[string]any{"kb": "kb", "entities": []map[string]any{entityRow(alice), entityRow(bob), entityRow(carol), entityRow(dave)}}},
		step{contains: []string{"UNWIND $mentions AS row", "MERGE (c:Chunk {kb_id: $kb, id: row.chunk})", "MERGE (c)-[:MENTIONS]->(e)"},
			params: map[string]any{"kb": "kb", "mentions": []map[string]any{mention("f1_a", "f1", "Alice"), mention("f1_a", "f1", "Bob"),
				mention("f1_b", "f1", "Bob"), mention("f1_b", "f1", "Carol"), mention("f2_a", "f2", "Bob"), mention("f2_a", "f2", "Carol"), mention("f2_a", "f2", "Dave")}}},
		step{contains: []string{"UNWIND $relations AS row", "MERGE (s)-[r:RELATION {id: row.id}]->(t)", "r.chunks + row.chunk"},
			params: map[string]any{"kb": "kb", "relations": []map[string]any{relRow(rel("Alice", "knows", "Bob"), "f1_a"), relRow(rel("Bob", "knows", "Carol"), "f1_b"),
				relRow(rel("Bob", "knows", "Carol"), "f2_a"), relRow(rel("Carol", "likes", "Dave"), "f2_a")}}},
		// DeleteFile(f1): only f1's chunks, only the entities they touched.
		lock("kb"),
		step{contains: []string{"MATCH (c:Chunk {kb_id: $kb, file_id: $file})"}, params: map[string]any{"kb": "kb", "file": "f1"}, fields: []string{"id"}, records: [][]any{{"f1_a"}, {"f1_b"}}},
		unmentionSteps("kb", []string{"f1_a", "f1_b"}, ids("Alice", "Bob", "Carol")),
		collectStep("kb", ids("Alice", "Bob", "Carol")),
		// What is left, as the server answers.
		step{contains: []string{"COUNT { (:Chunk)-[:MENTIONS]->(e) }", "ORDER BY n DESC, e.id LIMIT $limit"}, params: map[string]any{"kb": "kb", "limit": 1000},
			fields: entityFields, records: [][]any{entityRecord(bob), entityRecord(carol), entityRecord(dave)}},
		step{contains: []string{"count(*) AS n"}, params: map[string]any{"kb": "kb"}, fields: []string{"label", "n"}, records: [][]any{{"Person", 3}}},
		step{contains: []string{"count(r) AS relations", "count(DISTINCT c.file_id) AS files"}, params: map[string]any{"kb": "kb"},
			fields: []string{"relations", "chunks", "files"}, records: [][]any{{2, 1, 1}}},
		// Deleting it again: the file has no chunks, nothing else is sent.
		lock("kb"),
		step{contains: []string{"file_id: $file"}, params: map[string]any{"kb": "kb", "file": "f1"}, fields: []string{"id"}},
	))
	e := openStub(t, s)
	ctx := context.Background()
	if err := e.WriteChunks(ctx, "kb", []graph.ChunkGraph{c1, c2, c3}); err != nil {
		t.Fatalf("WriteChunks: %v", err)
	}
	if err := e.DeleteFile(ctx, "kb", "f1"); err != nil {
		t.Fatalf("DeleteFile: %v", err)
	}
	found, err := e.FindEntities(ctx, "kb", "*", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(found, []graph.Entity{bob, carol, dave}) {
		t.Fatalf("entities after deleting f1 = %+v", found)
	}
	st, err := e.Stats(ctx, "kb")
	if err != nil {
		t.Fatal(err)
	}
	if st.Entities != 3 || st.Relations != 2 || st.Chunks != 1 || st.Files != 1 || !slices.Equal(st.EntityType, []graph.LabelCount{{Label: "Person", Count: 3}}) {
		t.Fatalf("stats = %+v", st)
	}
	if err := e.DeleteFile(ctx, "kb", "f1"); err != nil {
		t.Fatal(err)
	}
	if n := s.received("COMMIT"); n != 5 {
		t.Fatalf("%d commits, want 5 (one per transaction: three writes, two reads)", n)
	}
}

// The contract's ExpandHonoursDepthAndLimits: one statement per hop with
// the frontier of that hop, relations among the returned entities only.
func TestBoltExpandWalksHopByHop(t *testing.T) {
	t.Parallel()
	ent := map[string]graph.Entity{}
	for _, n := range []string{"a", "b", "c", "x1", "x2"} {
		ent[n] = person(n)
	}
	rab, rbc, rx1a, rax2, rcd := rel("a", "r", "b"), rel("b", "r", "c"), rel("x1", "r", "a"), rel("a", "r", "x2"), rel("c", "r", "d")
	hopRecords := func(rs ...graph.Relation) [][]any {
		sort.Slice(rs, func(i, j int) bool { return rs[i].ID < rs[j].ID })
		var out [][]any
		for _, r := range rs {
			out = append(out, []any{r.ID, r.Source, r.Target, r.Type, r.Description})
		}
		return out
	}
	// The entities first reached from a, in the order of the hop's rows.
	var first []string
	for _, r := range hopRecords(rab, rx1a, rax2) {
		for _, end := range []string{r[1].(string), r[2].(string)} {
			if end != ent["a"].ID && !slices.Contains(first, end) {
				first = append(first, end)
			}
		}
	}
	byID := map[string]graph.Entity{}
	for _, x := range ent {
		byID[x.ID] = x
	}
	records := func(ids []string) [][]any {
		var out [][]any
		for _, id := range ids {
			out = append(out, entityRecord(byID[id]))
		}
		return out
	}
	hopFields := []string{"id", "source", "target", "type", "description"}
	s := newBoltStub(t, v54, script(
		step{contains: []string{"UNWIND $ids AS id", "MATCH (e:Entity {kb_id: $kb, id: id})"}, params: map[string]any{"kb": "kb", "ids": []string{ent["a"].ID, "ent_missing"}},
			fields: entityFields, records: records([]string{ent["a"].ID})},
		step{contains: []string{"UNWIND $frontier AS fid", "-[r:RELATION]-(:Entity)", "ORDER BY id"}, params: map[string]any{"kb": "kb", "frontier": []string{ent["a"].ID}},
			fields: hopFields, records: hopRecords(rab, rx1a, rax2)},
		step{contains: []string{"UNWIND $frontier AS fid"}, params: map[string]any{"kb": "kb", "frontier": first},
			fields: hopFields, records: hopRecords(rab, rx1a, rax2, rbc)},
		step{contains: []string{"UNWIND $ids AS id"}, params: map[string]any{"kb": "kb", "ids": append(append([]string(nil), first...), ent["c"].ID)},
			fields: entityFields, records: records(append(append([]string(nil), first...), ent["c"].ID))},
		// A 3-node limit stops inside the first hop.
		step{contains: []string{"UNWIND $ids AS id"}, params: map[string]any{"kb": "kb", "ids": []string{ent["a"].ID}}, fields: entityFields, records: records([]string{ent["a"].ID})},
		step{contains: []string{"UNWIND $frontier AS fid"}, params: map[string]any{"kb": "kb", "frontier": []string{ent["a"].ID}}, fields: hopFields, records: hopRecords(rab, rx1a, rax2)},
		step{contains: []string{"UNWIND $ids AS id"}, params: map[string]any{"kb": "kb", "ids": first[:2]}, fields: entityFields, records: records(first[:2])},
	))
	_ = rcd
	e := openStub(t, s)
	ctx := context.Background()
	sg, err := e.Expand(ctx, "kb", []string{ent["a"].ID, "ent_missing"}, 2, graph.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range sg.Entities {
		names = append(names, x.Name)
	}
	if names[0] != "a" || len(names) != 5 || len(sg.Relations) != 4 || sg.Truncated {
		t.Fatalf("2 hops from a = %v with %d relations (truncated %v)", names, len(sg.Relations), sg.Truncated)
	}
	sort.Strings(names)
	if !slices.Equal(names, []string{"a", "b", "c", "x1", "x2"}) {
		t.Fatalf("2 hops from a = %v", names)
	}
	sg, err = e.Expand(ctx, "kb", []string{ent["a"].ID}, 4, graph.Limits{MaxNodes: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(sg.Entities) != 3 || !sg.Truncated {
		t.Fatalf("3-node limit: %+v", sg)
	}
	for _, r := range sg.Relations {
		in := func(id string) bool {
			return slices.ContainsFunc(sg.Entities, func(x graph.Entity) bool { return x.ID == id })
		}
		if !in(r.Source) || !in(r.Target) {
			t.Fatalf("relation %+v leaves the returned entities", r)
		}
	}
}

// The contract's LookupsAndStats: what each lookup sends (a LIKE wildcard is
// sent as is: STARTS WITH matches literally) and how answers are read.
func TestBoltLookups(t *testing.T) {
	t.Parallel()
	paris := graph.Entity{ID: graph.EntityID("Paris", "City"), Name: "Paris", Label: "City"}
	marie := person("Marie")
	s := newBoltStub(t, v54, script(
		step{contains: []string{"RETURN DISTINCT e.label AS label ORDER BY label"}, params: map[string]any{"kb": "kb"}, fields: []string{"label"},
			records: [][]any{{"City"}, {"Country"}, {"Person"}}},
		step{contains: []string{"e.name_lower STARTS WITH $prefix OR e.label = $label"}, params: map[string]any{"kb": "kb", "prefix": "pa", "label": "Pa", "limit": 10},
			fields: entityFields, records: [][]any{entityRecord(paris)}},
		step{contains: []string{"STARTS WITH $prefix"}, params: map[string]any{"kb": "kb", "prefix": "%", "label": "%", "limit": 10}, fields: entityFields},
		step{contains: []string{"UNWIND $names AS name", "MATCH (e:Entity {kb_id: $kb, name_lower: name})", "ORDER BY size(e.name) DESC, e.id LIMIT $limit"},
			params: map[string]any{"kb": "kb", "names": []string{"paris", "marie", "nowhere"}, "limit": 10}, fields: entityFields,
			records: [][]any{entityRecord(marie), entityRecord(paris)}},
		step{contains: []string{"-[:MENTIONS]->(e:Entity {kb_id: $kb, id: eid})", "RETURN e.id AS k, c.id AS v"}, params: map[string]any{"kb": "kb", "ids": []string{paris.ID}},
			fields: []string{"k", "v"}, records: [][]any{{paris.ID, "c1"}, {paris.ID, "c3"}}},
		step{contains: []string{"UNWIND $ids AS cid", "RETURN c.id AS k, e.id AS v"}, params: map[string]any{"kb": "kb", "ids": []string{"c3", "c9"}},
			fields: []string{"k", "v"}, records: [][]any{{"c3", marie.ID}, {"c3", paris.ID}}},
		step{contains: []string{"count(*) AS n"}, params: map[string]any{"kb": "other"}, fields: []string{"label", "n"}},
		step{contains: []string{"count(r) AS relations"}, params: map[string]any{"kb": "other"}, fields: []string{"relations", "chunks", "files"}, records: [][]any{{0, 0, 0}}},
	))
	e := openStub(t, s)
	ctx := context.Background()
	labels, err := e.Labels(ctx, "kb")
	if err != nil || !slices.Equal(labels, []string{"City", "Country", "Person"}) {
		t.Fatalf("Labels = %v, %v", labels, err)
	}
	found, err := e.FindEntities(ctx, "kb", " Pa ", 10)
	if err != nil || !slices.Equal(found, []graph.Entity{paris}) {
		t.Fatalf("FindEntities(pa) = %+v, %v", found, err)
	}
	if found, err = e.FindEntities(ctx, "kb", "%", 10); err != nil || len(found) != 0 {
		t.Fatalf("FindEntities(%%) = %+v, %v", found, err)
	}
	named, err := e.EntitiesNamed(ctx, "kb", []string{"paris", "marie", "nowhere"}, 10)
	if err != nil || !slices.Equal(named, []graph.Entity{marie, paris}) {
		t.Fatalf("EntitiesNamed = %+v, %v", named, err)
	}
	m, err := e.Mentions(ctx, "kb", []string{paris.ID})
	if err != nil || !slices.Equal(m[paris.ID], []string{"c1", "c3"}) {
		t.Fatalf("Mentions = %v, %v", m, err)
	}
	ce, err := e.ChunkEntities(ctx, "kb", []string{"c3", "c9"})
	if err != nil || len(ce["c9"]) != 0 || !slices.Equal(ce["c3"], []string{marie.ID, paris.ID}) {
		t.Fatalf("ChunkEntities = %v, %v", ce, err)
	}
	st, err := e.Stats(ctx, "other")
	if err != nil || st.Entities != 0 || st.EntityType == nil || len(st.EntityType) != 0 {
		t.Fatalf("Stats of an empty graph = %+v, %v", st, err)
	}
}

// A transient failure (a deadlock) makes the driver roll back and run the
// whole transaction again; the write still happens once.
func TestBoltTransientFailureRetriesTheTransaction(t *testing.T) {
	t.Parallel()
	failLock := lock("kb")
	failLock.fail = "Neo.TransientError.Transaction.DeadlockDetected"
	s := newBoltStub(t, v54, script(
		failLock,
		lock("kb"), unmentionSteps("kb", []string{"c1", "c2"}, ids("Alice")), collectStep("kb", ids("Alice")),
	))
	e := openStub(t, s)
	if err := e.RemoveChunks(context.Background(), "kb", []string{"c1", "c2"}); err != nil {
		t.Fatalf("RemoveChunks after a deadlock: %v", err)
	}
	if b, c := s.received("BEGIN"), s.received("COMMIT"); b != 2 || c != 1 {
		t.Fatalf("%d BEGIN, %d COMMIT: want the transaction begun twice, committed once", b, c)
	}
	if s.received("RESET")+s.received("ROLLBACK") == 0 {
		t.Fatal("the failed transaction was neither reset nor rolled back")
	}
}

// A client error is not retried and reaches the caller.
func TestBoltClientErrorIsReturned(t *testing.T) {
	t.Parallel()
	bad := lock("kb")
	bad.fail = "Neo.ClientError.Schema.ConstraintValidationFailed"
	s := newBoltStub(t, v54, script(bad))
	e := openStub(t, s)
	err := e.DeleteKB(context.Background(), "kb")
	if err == nil || !strings.Contains(err.Error(), "ConstraintValidationFailed") {
		t.Fatalf("DeleteKB = %v, want the server's error", err)
	}
	if n := s.received("BEGIN"); n != 1 {
		t.Fatalf("%d BEGIN: a client error must not be retried", n)
	}
}

// One chunk with many entities is one statement per kind of row, however
// many rows (UNWIND), and a parameter larger than a Bolt chunk arrives whole.
func TestBoltLargeWriteIsOneStatementPerKind(t *testing.T) {
	t.Parallel()
	var x graph.Extracted
	for i := range 1500 {
		x.Entities = append(x.Entities, graph.ExtractedEntity{Name: fmt.Sprintf("Entity number %04d with a longer name", i), Type: "Thing"})
	}
	c := graph.Build("c1", "f", x)
	var rows, mentions []map[string]any
	for _, en := range c.Entities {
		rows = append(rows, entityRow(en))
		mentions = append(mentions, map[string]any{"chunk": "c1", "file": "f", "entity": en.ID})
	}
	s := newBoltStub(t, v54, script(lock("kb"), unmentionSteps("kb", []string{"c1"}, nil),
		step{contains: []string{"UNWIND $entities AS row"}, params: map[string]any{"kb": "kb", "entities": rows}},
		step{contains: []string{"UNWIND $mentions AS row"}, params: map[string]any{"kb": "kb", "mentions": mentions}},
	))
	e := openStub(t, s)
	if err := e.WriteChunks(context.Background(), "kb", []graph.ChunkGraph{c}); err != nil {
		t.Fatal(err)
	}
	if n := s.received("RUN"); n != 10 {
		t.Fatalf("%d RUN messages, want 10 (5 schema, lock, 2 unmention, entities, mentions)", n)
	}
}

// Version negotiation: the stub speaking only Bolt 4.4 gets HELLO with the
// credentials in it; speaking 5.4, HELLO then LOGON; speaking none of the
// client's versions, Open fails.
func TestBoltNegotiatesTheVersion(t *testing.T) {
	t.Parallel()
	labels := step{contains: []string{"e.label AS label"}, params: map[string]any{"kb": "kb"}, fields: []string{"label"}, records: [][]any{{"Person"}}}
	for _, tc := range []struct {
		name     string
		versions []version
		logon    int
	}{{"bolt 4.4", []version{{4, 4}}, 0}, {"bolt 5.4", v54, 1}, {"bolt 5.1 preferred", []version{{5, 1}, {5, 4}}, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newBoltStub(t, tc.versions, script(labels))
			e := openStub(t, s)
			if l, err := e.Labels(context.Background(), "kb"); err != nil || !slices.Equal(l, []string{"Person"}) {
				t.Fatalf("Labels = %v, %v", l, err)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.agreed[0] != tc.versions[0] {
				t.Fatalf("agreed on %v, want %v", s.agreed[0], tc.versions[0])
			}
			if len(s.auth) == 0 || s.auth[0]["scheme"] != "basic" || s.auth[0]["principal"] != "neo4j" || s.auth[0]["credentials"] != "secret" {
				t.Fatalf("credentials sent: %v", s.auth)
			}
			if n := slices.Index(s.log, "LOGON"); (n >= 0) != (tc.logon > 0) {
				t.Fatalf("messages %v: LOGON expected %v", s.log, tc.logon > 0)
			}
		})
	}
	t.Run("no common version", func(t *testing.T) {
		t.Parallel()
		s := newBoltStub(t, []version{{6, 0}}, nil)
		s.script = nil
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := neo4j.Open(ctx, neo4j.Config{URI: s.uri(), Username: "neo4j", Password: "secret"}); err == nil {
			t.Fatal("Open succeeded with no common Bolt version")
		}
	})
}
