package access_test

import (
	"encoding/json"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

func TestParseShareConfig(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		raw     string
		wantErr bool
		check   func(t *testing.T, c *access.ShareConfig)
	}{
		{name: "empty means no config", raw: ``, check: isNil},
		{name: "null means no config", raw: `null`, check: isNil},
		{name: "global read, no manage", raw: `{"version":2,"read_scope":{"access_level":"global"},"manage_scope":null}`,
			check: func(t *testing.T, c *access.ShareConfig) {
				if c == nil || c.ReadScope.AccessLevel != "global" || c.ManageScope != nil {
					t.Fatalf("got %+v", c)
				}
			}},
		{name: "department read with lists", raw: `{"version":2,"read_scope":{"access_level":"department","department_ids":[1,2]},
			"manage_scope":{"access_level":"department","department_ids":[2]}}`,
			check: func(t *testing.T, c *access.ShareConfig) {
				if len(c.ReadScope.DepartmentIDs) != 2 || c.ManageScope == nil || c.ManageScope.DepartmentIDs[0] != 2 {
					t.Fatalf("got %+v", c)
				}
			}},
		{name: "user read with user manage subset", raw: `{"version":2,"read_scope":{"access_level":"user","user_uids":["bob","carol"]},
			"manage_scope":{"access_level":"user","user_uids":["carol"]}}`,
			check: func(t *testing.T, c *access.ShareConfig) {
				if len(c.ReadScope.UserUIDs) != 2 || c.ManageScope.UserUIDs[0] != "carol" {
					t.Fatalf("got %+v", c)
				}
			}},
		{name: "global read admits any manage scope", raw: `{"version":2,"read_scope":{"access_level":"global"},"manage_scope":{"access_level":"global"}}`},
		{name: "department read admits a user manage scope", raw: `{"version":2,"read_scope":{"access_level":"department","department_ids":[1]},
			"manage_scope":{"access_level":"user","user_uids":["bob"]}}`},

		{name: "version 1", raw: `{"version":1,"read_scope":{"access_level":"global"}}`, wantErr: true},
		{name: "version missing", raw: `{"read_scope":{"access_level":"global"}}`, wantErr: true},
		{name: "not JSON", raw: `{"version":2,`, wantErr: true},
		{name: "wrong type", raw: `{"version":"2","read_scope":{"access_level":"global"}}`, wantErr: true},
		{name: "read scope missing", raw: `{"version":2}`, wantErr: true},
		{name: "unknown read access level", raw: `{"version":2,"read_scope":{"access_level":"public"}}`, wantErr: true},
		{name: "unknown manage access level", raw: `{"version":2,"read_scope":{"access_level":"global"},"manage_scope":{"access_level":"everyone"}}`, wantErr: true},
		{name: "global manage over department read", raw: `{"version":2,"read_scope":{"access_level":"department","department_ids":[1]},
			"manage_scope":{"access_level":"global"}}`, wantErr: true},
		{name: "manage department outside read departments", raw: `{"version":2,"read_scope":{"access_level":"department","department_ids":[1]},
			"manage_scope":{"access_level":"department","department_ids":[1,3]}}`, wantErr: true},
		{name: "global manage over user read", raw: `{"version":2,"read_scope":{"access_level":"user","user_uids":["bob"]},
			"manage_scope":{"access_level":"global"}}`, wantErr: true},
		{name: "department manage over user read", raw: `{"version":2,"read_scope":{"access_level":"user","user_uids":["bob"]},
			"manage_scope":{"access_level":"department","department_ids":[1]}}`, wantErr: true},
		{name: "manage user outside read users", raw: `{"version":2,"read_scope":{"access_level":"user","user_uids":["bob"]},
			"manage_scope":{"access_level":"user","user_uids":["bob","mallory"]}}`, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := access.Parse(json.RawMessage(tc.raw))
			if tc.wantErr {
				fe, ok := failure.As(err)
				if !ok || fe.Kind != failure.KindUnprocessable || fe.Code != "invalid_share_config" {
					t.Fatalf("want 422 invalid_share_config, got %v (config %+v)", err, c)
				}
				if c != nil {
					t.Fatalf("rejected config returned %+v", c)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tc.check != nil {
				tc.check(t, c)
			} else if c == nil {
				t.Fatal("valid config parsed to nil")
			}
		})
	}
}

func isNil(t *testing.T, c *access.ShareConfig) {
	t.Helper()
	if c != nil {
		t.Fatalf("want no config, got %+v", c)
	}
}

func dept(id int64) *int64 { return &id }

func mustParse(t *testing.T, raw string) *access.ShareConfig {
	t.Helper()
	c, err := access.Parse(json.RawMessage(raw))
	if err != nil {
		t.Fatalf("parse %s: %v", raw, err)
	}
	return c
}

func TestResolve(t *testing.T) {
	t.Parallel()
	alice := access.Subject{UID: "alice", Role: "user", DepartmentID: dept(1)}
	bob := access.Subject{UID: "bob", Role: "user", DepartmentID: dept(2)}
	carol := access.Subject{UID: "carol", Role: "user", DepartmentID: dept(1)}
	noDept := access.Subject{UID: "dave", Role: "user"}
	admin := access.Subject{UID: "adm", Role: "admin", DepartmentID: dept(3)}
	root := access.Subject{UID: "root", Role: "superadmin", DepartmentID: dept(3)}

	userRead := mustParse(t, `{"version":2,"read_scope":{"access_level":"user","user_uids":["bob","carol"]},"manage_scope":null}`)
	userManage := mustParse(t, `{"version":2,"read_scope":{"access_level":"user","user_uids":["bob","carol"]},
		"manage_scope":{"access_level":"user","user_uids":["carol"]}}`)
	deptRead := mustParse(t, `{"version":2,"read_scope":{"access_level":"department","department_ids":[1]}}`)
	deptManage := mustParse(t, `{"version":2,"read_scope":{"access_level":"department","department_ids":[1,2]},
		"manage_scope":{"access_level":"department","department_ids":[2]}}`)
	globalRead := mustParse(t, `{"version":2,"read_scope":{"access_level":"global"},"manage_scope":null}`)
	globalManage := mustParse(t, `{"version":2,"read_scope":{"access_level":"global"},"manage_scope":{"access_level":"global"}}`)
	// A user-level manage scope inside a department read scope: the manager
	// must also be admitted by the read scope to manage.
	deptReadUserManage := mustParse(t, `{"version":2,"read_scope":{"access_level":"department","department_ids":[1]},
		"manage_scope":{"access_level":"user","user_uids":["bob","carol"]}}`)
	// Only the creator: an empty user list.
	nobody := mustParse(t, `{"version":2,"read_scope":{"access_level":"user"}}`)

	cases := []struct {
		name      string
		sub       access.Subject
		createdBy string
		cfg       *access.ShareConfig
		ceiling   access.Level
		want      access.Level
	}{
		{"superadmin manages anything", root, "alice", nobody, access.Manage, access.Manage},
		{"superadmin manages without config", root, "system", nil, access.Manage, access.Manage},
		{"creator manages own restricted resource", alice, "alice", nobody, access.Manage, access.Manage},
		{"admin is not a superadmin", admin, "alice", nobody, access.Manage, access.None},
		{"empty creator never matches an empty uid", access.Subject{Role: "user"}, "", nobody, access.Manage, access.None},
		{"no config: everyone reads", bob, "system", nil, access.Manage, access.Read},
		{"no config: admin reads, not manages", admin, "system", nil, access.Manage, access.Read},

		{"global read admits anyone", noDept, "alice", globalRead, access.Manage, access.Read},
		{"global manage admits anyone", bob, "alice", globalManage, access.Manage, access.Manage},

		{"department read admits member", carol, "alice", deptRead, access.Manage, access.Read},
		{"department read refuses other department", bob, "alice", deptRead, access.Manage, access.None},
		{"department read refuses user without department", noDept, "alice", deptRead, access.Manage, access.None},
		{"department manage admits manager department", bob, "alice", deptManage, access.Manage, access.Manage},
		{"department manage: reader department only reads", carol, "alice", deptManage, access.Manage, access.Read},

		{"user read admits listed user", bob, "alice", userRead, access.Manage, access.Read},
		{"user read refuses unlisted user", admin, "alice", userRead, access.Manage, access.None},
		{"user manage admits listed manager", carol, "alice", userManage, access.Manage, access.Manage},
		{"user manage: listed reader only reads", bob, "alice", userManage, access.Manage, access.Read},

		{"manage needs read admission too: bob outside department", bob, "alice", deptReadUserManage, access.Manage, access.None},
		{"manage needs read admission too: carol in department", carol, "alice", deptReadUserManage, access.Manage, access.Manage},

		{"ceiling caps superadmin", root, "alice", nil, access.Read, access.Read},
		{"ceiling caps creator", alice, "alice", nobody, access.Read, access.Read},
		{"ceiling caps manage scope", carol, "alice", userManage, access.Read, access.Read},
		{"ceiling does not raise", bob, "alice", userRead, access.Manage, access.Read},
		{"ceiling none hides everything", root, "root", nil, access.None, access.None},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := access.Resolve(tc.sub, tc.createdBy, tc.cfg, tc.ceiling); got != tc.want {
				t.Fatalf("Resolve(%s as %s) = %s, want %s", tc.sub.UID, tc.sub.Role, got, tc.want)
			}
		})
	}
}

func TestLevelString(t *testing.T) {
	t.Parallel()
	for l, want := range map[access.Level]string{access.None: "none", access.Read: "read", access.Manage: "manage", access.Level(9): "none"} {
		if got := l.String(); got != want {
			t.Errorf("Level(%d).String() = %q, want %q", l, got, want)
		}
	}
	if !(access.None < access.Read && access.Read < access.Manage) {
		t.Fatal("levels must be ordered none < read < manage")
	}
}
