package skill_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
	"github.com/yuxi-serverless/yuxi/shared/skill"
)

func TestSharedSkillLifecycleAndAccess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.NewDatabase(t)
	store, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	svc := skill.New(pool, store, nil, nil, nil, skill.Config{}, nil)
	dept := int64(1)
	admin := access.Subject{UID: "adm", Role: "admin", DepartmentID: &dept}
	bob := access.Subject{UID: "bob", Role: "user", DepartmentID: &dept}
	carol := access.Subject{UID: "carol", Role: "user", DepartmentID: &dept}

	if _, err := svc.SyncBuiltins(ctx, "system"); err != nil {
		t.Fatal(err)
	}
	zipped := zipOf(t, entry{name: "demo/SKILL.md", data: []byte("---\nname: demo-skill\ndescription: A demo.\nskill_dependencies: [html-preview]\n---\n# Demo\n")},
		entry{name: "demo/scripts/run.py", data: []byte("print(1)\n")})
	d, err := svc.PrepareUpload(ctx, admin, "demo.zip", zipped)
	if err != nil || len(d.Items) != 1 || d.Items[0].Slug != "demo-skill" {
		t.Fatalf("prepare: %+v %v", d, err)
	}
	// A draft is its creator's: another user cannot confirm or discard it.
	if err := svc.Discard(ctx, bob, d.DraftID); code(err) != "skill_draft_not_found" {
		t.Fatalf("bob discards the admin's draft: %v", err)
	}
	share := json.RawMessage(`{"version":2,"read_scope":{"access_level":"user","user_uids":["bob"]}}`)
	rs, err := svc.ConfirmShared(ctx, admin, d.DraftID, nil, share)
	if err != nil || len(rs) != 1 || !rs[0].Success {
		t.Fatalf("confirm: %+v %v", rs, err)
	}
	// bob reads it, carol does not see it; bob cannot manage it.
	if f, err := svc.ReadFile(ctx, bob, "demo-skill", "scripts/run.py"); err != nil || f.Content != "print(1)\n" {
		t.Fatalf("bob reads: %+v %v", f, err)
	}
	if _, err := svc.Tree(ctx, carol, "demo-skill"); code(err) != "skill_not_found" {
		t.Fatalf("carol: %v", err)
	}
	if err := svc.UpdateFile(ctx, bob, "demo-skill", "scripts/run.py", "x"); code(err) != "skill_manage_forbidden" {
		t.Fatalf("bob edits: %v", err)
	}
	// The same upload again gets a free slug; a cycle through dependencies is refused.
	d2, err := svc.PrepareUpload(ctx, admin, "demo.zip", zipped)
	if err != nil || d2.Items[0].Slug != "demo-skill-v2" {
		t.Fatalf("second prepare: %+v %v", d2, err)
	}
	if _, err := svc.ConfirmShared(ctx, admin, d2.DraftID, nil, json.RawMessage(`{"version":2,"read_scope":{"access_level":"global"}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetDependencies(ctx, admin, "demo-skill", skill.Dependencies{Skills: []string{"demo-skill-v2"}}); err != nil {
		t.Fatalf("demo-skill → v2: %v", err)
	}
	if _, err := svc.SetDependencies(ctx, admin, "demo-skill-v2", skill.Dependencies{Skills: []string{"demo-skill"}}); code(err) != "skill_dependency_cycle" {
		t.Fatalf("cycle: %v", err)
	}
	// Built-in skills cannot be edited or deleted.
	if err := svc.Delete(ctx, admin, "knowledge-base"); code(err) != "skill_builtin_readonly" {
		t.Fatalf("delete built-in: %v", err)
	}
	// Export holds the files; delete removes index and files.
	b, _, err := svc.Export(ctx, bob, "demo-skill")
	if err != nil {
		t.Fatal(err)
	}
	if fs, err := skill.Unzip(b, skill.Limits{}); err != nil || len(fs) != 2 {
		t.Fatalf("export: %v %v", fs, err)
	}
	if err := svc.Delete(ctx, admin, "demo-skill-v2"); code(err) != "skill_in_use" {
		t.Fatalf("delete a dependency: %v", err)
	}
	if err := svc.Delete(ctx, admin, "demo-skill"); err != nil {
		t.Fatal(err)
	}
	if left, _ := store.List(ctx, "skills/demo-skill/"); len(left) != 0 {
		t.Fatalf("files left: %v", left)
	}
}
