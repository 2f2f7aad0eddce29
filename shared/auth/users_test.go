package auth_test

import (
	"context"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

func TestCreateUserRoleCeilingAndDepartments(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	root := f.superadmin(t)

	var salesID int64
	if err := f.pool.QueryRow(ctx, `INSERT INTO departments (name) VALUES ('sales') RETURNING id`).Scan(&salesID); err != nil {
		t.Fatal(err)
	}
	// A superadmin creates an admin in another department.
	boss, err := f.svc.CreateUser(ctx, root, auth.NewUser{UID: "boss", Username: "Boss", Password: testPassword, Role: auth.RoleAdmin, DepartmentID: &salesID})
	if err != nil {
		t.Fatal(err)
	}
	if boss.Role != auth.RoleAdmin || boss.DepartmentID == nil || *boss.DepartmentID != salesID || *boss.DepartmentName != "sales" {
		t.Fatalf("created admin = %+v", boss)
	}
	tok, err := f.svc.Login(ctx, "boss", testPassword)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := f.svc.Authenticate(ctx, "Bearer "+tok.AccessToken)
	if err != nil {
		t.Fatal(err)
	}

	// An admin creates plain users, always in its own department.
	u, err := f.svc.CreateUser(ctx, admin, auth.NewUser{UID: "clerk", Password: testPassword})
	if err != nil {
		t.Fatal(err)
	}
	if u.Role != auth.RoleUser || *u.DepartmentID != salesID || u.Username != "clerk" {
		t.Fatalf("created user = %+v", u)
	}
	_, err = f.svc.CreateUser(ctx, admin, auth.NewUser{UID: "admin2", Password: testPassword, Role: auth.RoleAdmin})
	wantCode(t, err, failure.KindForbidden, "role_forbidden")
	defaultDept := *root.DepartmentID
	_, err = f.svc.CreateUser(ctx, admin, auth.NewUser{UID: "elsewhere", Password: testPassword, DepartmentID: &defaultDept})
	wantCode(t, err, failure.KindForbidden, "department_forbidden")
	// Naming its own department is refused too, as the original (issue 9).
	_, err = f.svc.CreateUser(ctx, admin, auth.NewUser{UID: "own-dept", Password: testPassword, DepartmentID: &salesID})
	wantCode(t, err, failure.KindForbidden, "department_forbidden")
	_, err = f.svc.CreateUser(ctx, root, auth.NewUser{UID: "root2", Password: testPassword, Role: auth.RoleSuperadmin})
	wantCode(t, err, failure.KindUnprocessable, "invalid_role")

	// A plain user cannot create anyone.
	clerk := f.loginPrincipal(t, "clerk")
	_, err = f.svc.CreateUser(ctx, clerk, auth.NewUser{UID: "sneaky", Password: testPassword})
	wantCode(t, err, failure.KindForbidden, "admin_required")

	// Conflicts and validation.
	_, err = f.svc.CreateUser(ctx, root, auth.NewUser{UID: "clerk", Password: testPassword})
	wantCode(t, err, failure.KindConflict, "uid_taken")
	_, err = f.svc.CreateUser(ctx, root, auth.NewUser{UID: "weak", Password: "1234567"})
	wantCode(t, err, failure.KindUnprocessable, "weak_password")
	missing := int64(424242)
	_, err = f.svc.CreateUser(ctx, root, auth.NewUser{UID: "lost", Password: testPassword, DepartmentID: &missing})
	wantCode(t, err, failure.KindUnprocessable, "department_not_found")
	if n := f.count(t, `SELECT count(*) FROM users WHERE uid IN ('admin2', 'elsewhere', 'root2', 'sneaky', 'weak', 'lost')`); n != 0 {
		t.Fatalf("refused creates left %d users", n)
	}

	// Listing is scoped: the sales admin sees sales only; the superadmin sees all.
	seen := func(p auth.Principal) map[string]bool {
		users, err := f.svc.ListUsers(ctx, p, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, u := range users {
			m[u.UID] = true
		}
		return m
	}
	if got := seen(admin); len(got) != 2 || !got["boss"] || !got["clerk"] {
		t.Fatalf("sales admin sees %v", got)
	}
	if got := seen(root); len(got) != 3 || !got["root"] {
		t.Fatalf("superadmin sees %v", got)
	}
	_, err = f.svc.ListUsers(ctx, clerk, 0, 100)
	wantCode(t, err, failure.KindForbidden, "admin_required")

	me, err := f.svc.Me(ctx, clerk)
	if err != nil || me.UID != "clerk" || me.LastLogin == nil || *me.DepartmentName != "sales" {
		t.Fatalf("Me = %+v, %v", me, err)
	}
}
