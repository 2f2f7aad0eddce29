package kb_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

func testCreate(t *testing.T, e *env) {
	k, err := e.store.Create(e.ctx, owner, kb.CreateInput{DatabaseName: "  Manuals  ", Description: "d"})
	if err != nil {
		t.Fatal(err)
	}
	if k.Name != "Manuals" || k.DBID != k.KBID || !strings.HasPrefix(k.KBID, "kb_") || k.KBType != kb.TypeDocument ||
		k.EmbeddingModelSpec != "test:fixed" || k.EmbeddingDim != testDim || k.CreatedBy != "owner" || k.Permission != "manage" ||
		!k.SupportsDocuments || string(k.ShareConfig) != "null" || k.FileCount != 0 {
		t.Fatalf("created = %+v", k)
	}
	k2, err := e.store.Create(e.ctx, owner, kb.CreateInput{Name: "Old names", EmbedModelName: "other:model", EmbeddingDim: 768, KBType: "document"})
	if err != nil || k2.EmbeddingModelSpec != "other:model" || k2.EmbeddingDim != 768 || k2.KBType != kb.TypeDocument {
		t.Fatalf("created with the original's field names = %+v, %v", k2, err)
	}

	for _, c := range []struct {
		name string
		in   kb.CreateInput
		kind failure.Kind
		code string
	}{
		{"no name", kb.CreateInput{Name: "   "}, failure.KindUnprocessable, "invalid_kb"},
		{"long name", kb.CreateInput{Name: strings.Repeat("n", 201)}, failure.KindUnprocessable, "invalid_kb"},
		{"taken name", kb.CreateInput{Name: "Manuals"}, failure.KindConflict, "kb_name_taken"},
		{"dify without params", kb.CreateInput{Name: "d", KBType: "dify"}, failure.KindUnprocessable, "missing_connection_param"},
		{"lightrag", kb.CreateInput{Name: "d", KBType: "lightrag"}, failure.KindUnprocessable, "unsupported_kb_type"},
		{"unknown model", kb.CreateInput{Name: "m", EmbeddingModelSpec: "test:unknown"}, failure.KindUnprocessable, "unknown_model"},
		{"huge dim", kb.CreateInput{Name: "h", EmbeddingDim: 9000}, failure.KindUnprocessable, "invalid_embedding_dim"},
		{"share_config v1", kb.CreateInput{Name: "s", ShareConfig: json.RawMessage(`{"version":1,"read_scope":{"access_level":"global"}}`)},
			failure.KindUnprocessable, "invalid_share_config"},
		{"manage beyond read", kb.CreateInput{Name: "s2", ShareConfig: json.RawMessage(
			`{"version":2,"read_scope":{"access_level":"user","user_uids":["a"]},"manage_scope":{"access_level":"global"}}`)},
			failure.KindUnprocessable, "invalid_share_config"},
	} {
		_, err := e.store.Create(e.ctx, owner, c.in)
		if fe, ok := failure.As(err); !ok || fe.Kind != c.kind || fe.Code != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
	}
	l, _ := e.store.List(e.ctx, superadmin())
	for _, k := range l {
		if len(k.Name) <= 2 || k.Name == strings.Repeat("n", 201) {
			t.Fatalf("a refused create left KB %q", k.Name)
		}
	}
	// file_count counts files, not folders.
	e.addFile(t, k.KBID, "a.md")
	e.tx(t, func(tx pgx.Tx, _ outbox.Emit) error {
		_, err := e.store.CreateFolderTx(e.ctx, tx, k.KBID, "dir", nil, owner.UID)
		return err
	})
	if got, _ := e.store.Get(e.ctx, owner, k.KBID); got.FileCount != 1 {
		t.Fatalf("file_count = %d", got.FileCount)
	}
}

// TestAccess: the creator and superadmins manage; share_config grants read
// (and manage, to admins only) by user, department or everyone; a KB the
// caller cannot read does not exist for them, one they may only read
// refuses changes with 403.
func testAccess(t *testing.T, e *env) {
	kbs := map[string]kb.KB{
		"private": e.createKB(t, kb.CreateInput{Name: "private"}),
		"global":  e.createKB(t, kb.CreateInput{Name: "global", ShareConfig: json.RawMessage(`{"version":2,"read_scope":{"access_level":"global"}}`)}),
		"dept": e.createKB(t, kb.CreateInput{Name: "dept", ShareConfig: json.RawMessage(
			`{"version":2,"read_scope":{"access_level":"department","department_ids":[7]},"manage_scope":{"access_level":"department","department_ids":[7]}}`)}),
		"users": e.createKB(t, kb.CreateInput{Name: "users", ShareConfig: json.RawMessage(
			`{"version":2,"read_scope":{"access_level":"user","user_uids":["u1","a2"]},"manage_scope":{"access_level":"user","user_uids":["u1","a2"]}}`)}),
	}
	subjects := map[string]access.Subject{
		"owner":    owner,
		"root":     superadmin(),
		"a2":       admin("a2"),
		"u1":       user("u1"),
		"u7":       inDept(user("u7"), 7),
		"a7":       inDept(admin("a7"), 7),
		"a8":       inDept(admin("a8"), 8),
		"stranger": user("stranger"),
	}
	// want[subject][kb] = "manage" | "read" | "" (none)
	want := map[string]map[string]string{
		"owner":    {"private": "manage", "global": "manage", "dept": "manage", "users": "manage"},
		"root":     {"private": "manage", "global": "manage", "dept": "manage", "users": "manage"},
		"a2":       {"global": "read", "users": "manage"},
		"u1":       {"global": "read", "users": "read"}, // a plain user in manage_scope still only reads
		"u7":       {"global": "read", "dept": "read"},
		"a7":       {"global": "read", "dept": "manage"},
		"a8":       {"global": "read"},
		"stranger": {"global": "read"},
	}
	for sn, sub := range subjects {
		listed := map[string]string{}
		l, err := e.store.List(e.ctx, sub)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range l {
			listed[k.Name] = k.Permission
		}
		for kn, k := range kbs {
			w := want[sn][kn]
			if listed[kn] != w {
				t.Errorf("%s lists %s with %q, want %q", sn, kn, listed[kn], w)
			}
			got, err := e.store.Get(e.ctx, sub, k.KBID)
			switch {
			case w == "" && !errors.Is(err, kb.ErrNotFound):
				t.Errorf("%s gets %s: %v, want not found", sn, kn, err)
			case w != "" && (err != nil || got.Permission != w):
				t.Errorf("%s gets %s: %q, %v; want %q", sn, kn, got.Permission, err, w)
			}
			_, err = e.store.GetManaged(e.ctx, sub, k.KBID)
			switch w {
			case "manage":
				if err != nil {
					t.Errorf("%s manages %s: %v", sn, kn, err)
				}
			case "read":
				if fe, ok := failure.As(err); !ok || fe.Kind != failure.KindForbidden || !errors.Is(err, kb.ErrManage) {
					t.Errorf("%s manages %s: %v, want 403 %v", sn, kn, err, kb.ErrManage)
				}
			default:
				if fe, ok := failure.As(err); !ok || fe.Kind != failure.KindNotFound || !errors.Is(err, kb.ErrNotFound) {
					t.Errorf("%s manages %s: %v, want 404", sn, kn, err)
				}
			}
		}
	}

	// Changes follow the same rules.
	desc := "changed"
	_, err := e.store.Update(e.ctx, subjects["u7"], kbs["dept"].KBID, kb.UpdateInput{Description: &desc})
	wantErr(t, err, kb.ErrManage)
	_, err = e.store.Update(e.ctx, subjects["stranger"], kbs["private"].KBID, kb.UpdateInput{Description: &desc})
	wantErr(t, err, kb.ErrNotFound)
	u, err := e.store.Update(e.ctx, subjects["a7"], kbs["dept"].KBID, kb.UpdateInput{Description: &desc})
	if err != nil || u.Description != "changed" || u.Name != "dept" || u.Permission != "manage" {
		t.Fatalf("department manager's update = %+v, %v", u, err)
	}
	_, err = e.store.AddSource(e.ctx, subjects["u1"], kbs["users"].KBID, "s3", "bucket", "")
	wantErr(t, err, kb.ErrManage)
	if _, err := e.store.Sources(e.ctx, subjects["u1"], kbs["users"].KBID); err != nil {
		t.Fatalf("a reader lists sources: %v", err)
	}
	_, err = e.store.Sources(e.ctx, subjects["stranger"], kbs["users"].KBID)
	wantErr(t, err, kb.ErrNotFound)
	err = e.ob.Tx(e.ctx, e.pool, func(tx pgx.Tx, _ outbox.Emit) error {
		_, err := e.store.DeleteTx(e.ctx, tx, subjects["u1"], kbs["users"].KBID)
		return err
	})
	wantErr(t, err, kb.ErrManage)

	// A manager who withdraws the share_config makes the KB private again,
	// also to themselves.
	null := json.RawMessage("null")
	u, err = e.store.Update(e.ctx, subjects["a2"], kbs["users"].KBID, kb.UpdateInput{ShareConfig: &null})
	if err != nil || u.Permission != "none" || string(u.ShareConfig) != "null" {
		t.Fatalf("withdrawing the share_config = %q %s, %v", u.Permission, u.ShareConfig, err)
	}
	for _, sn := range []string{"u1", "a2"} {
		_, err = e.store.Get(e.ctx, subjects[sn], kbs["users"].KBID)
		wantErr(t, err, kb.ErrNotFound)
	}
	bad := json.RawMessage(`{"version":2,"read_scope":{"access_level":"team"}}`)
	_, err = e.store.Update(e.ctx, owner, kbs["users"].KBID, kb.UpdateInput{ShareConfig: &bad})
	wantCode(t, err, failure.KindUnprocessable, "invalid_share_config")

	// A share_config stored in an unreadable shape grants nothing beyond the
	// creator and superadmins.
	e.exec(t, `UPDATE knowledge_bases SET share_config = '{"version":3}' WHERE kb_id = $1`, kbs["global"].KBID)
	if _, err := e.store.Get(e.ctx, subjects["stranger"], kbs["global"].KBID); !errors.Is(err, kb.ErrNotFound) {
		t.Fatalf("stranger reads a KB with a broken share_config: %v", err)
	}
	if _, err := e.store.Get(e.ctx, owner, kbs["global"].KBID); err != nil {
		t.Fatalf("creator reads a KB with a broken share_config: %v", err)
	}
	// Load skips the access check (for event handlers).
	if k, err := e.store.Load(e.ctx, kbs["private"].KBID); err != nil || k.Name != "private" {
		t.Fatalf("Load = %+v, %v", k, err)
	}
	_, err = e.store.Load(e.ctx, "kb_missing")
	wantErr(t, err, kb.ErrNotFound)
}

func testUpdateAndDelete(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{Name: "alpha", AdditionalParams: json.RawMessage(`{"chunk_preset_id":"qa"}`)})
	e.createKB(t, kb.CreateInput{Name: "beta"})
	name, llm := " gamma ", "p:llm"
	u, err := e.store.Update(e.ctx, owner, k.KBID, kb.UpdateInput{Name: &name, LLMModelSpec: &llm})
	if err != nil || u.Name != "gamma" || u.LLMModelSpec == nil || *u.LLMModelSpec != "p:llm" || !u.UpdatedAt.After(k.UpdatedAt) ||
		!jsonEqual(u.AdditionalParams, `{"chunk_preset_id":"qa"}`) {
		t.Fatalf("update = %+v, %v", u, err)
	}
	taken := "beta"
	_, err = e.store.Update(e.ctx, owner, k.KBID, kb.UpdateInput{Name: &taken})
	wantCode(t, err, failure.KindConflict, "kb_name_taken")
	empty := ""
	_, err = e.store.Update(e.ctx, owner, k.KBID, kb.UpdateInput{Name: &empty})
	wantCode(t, err, failure.KindUnprocessable, "invalid_kb")
	_, err = e.store.Update(e.ctx, owner, "kb_missing", kb.UpdateInput{Name: &name})
	wantErr(t, err, kb.ErrNotFound)

	f, _ := e.ingest(t, k.KBID, "doc.md", "some words")
	if _, err := e.store.AddSource(e.ctx, owner, k.KBID, "s3", "bkt", "docs/"); err != nil {
		t.Fatal(err)
	}
	var deleted kb.KB
	e.tx(t, func(tx pgx.Tx, _ outbox.Emit) error {
		deleted, err = e.store.DeleteTx(e.ctx, tx, owner, k.KBID)
		return err
	})
	if deleted.KBID != k.KBID {
		t.Fatalf("Delete returned %+v", deleted)
	}
	_, err = e.store.Get(e.ctx, owner, k.KBID)
	wantErr(t, err, kb.ErrNotFound)
	_, err = e.store.LoadFile(e.ctx, f.FileID)
	wantErr(t, err, kb.ErrFileNotFound)
	var n int
	if err := e.pool.QueryRow(e.ctx, `SELECT (SELECT count(*) FROM knowledge_chunks WHERE kb_id = $1) +
		(SELECT count(*) FROM knowledge_sources WHERE kb_id = $1)`, k.KBID).Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows left after delete: %d, %v", n, err)
	}
}

// LoadSettings reads what Load reads but the file count.
func testLoadSettings(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{Description: "settings"})
	e.ingest(t, k.KBID, "a.md", "alpha")
	e.ingest(t, k.KBID, "b.md", "beta")
	full, err := e.store.Load(e.ctx, k.KBID)
	if err != nil || full.FileCount != 2 {
		t.Fatalf("Load = %+v, %v", full, err)
	}
	got, err := e.store.LoadSettings(e.ctx, k.KBID)
	if err != nil || got.FileCount != 0 {
		t.Fatalf("LoadSettings = %+v, %v", got, err)
	}
	got.FileCount = full.FileCount
	a, _ := json.Marshal(full)
	b, _ := json.Marshal(got)
	if string(a) != string(b) {
		t.Fatalf("LoadSettings %s\nLoad         %s", b, a)
	}
	if _, err := e.store.LoadSettings(e.ctx, "kb_missing"); !errors.Is(err, kb.ErrNotFound) {
		t.Fatalf("missing KB: %v", err)
	}
}
