// Package access resolves what a user may do with a shared resource (agent,
// knowledge base, skill) from its creator and its share_config (version 2):
// {version:2, read_scope:{access_level: global|department|user, department_ids[], user_uids[]},
//
//	manage_scope:{…}|null}. Superadmins and creators manage; others get what the
//
// scopes grant, capped by a role ceiling. A resource without share_config is
// readable by everyone (built-in resources).
//
// Imported by: domain packages that guard shared resources. May import: stdlib,
// shared/failure.
package access

import (
	"encoding/json"
	"slices"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Level of access, ordered.
type Level int

const (
	None Level = iota
	Read
	Manage
)

func (l Level) String() string {
	switch l {
	case Read:
		return "read"
	case Manage:
		return "manage"
	}
	return "none"
}

// Subject is who asks.
type Subject struct {
	UID          string
	Role         string // superadmin | admin | user
	DepartmentID *int64
}

// Scope is one side of a share_config.
type Scope struct {
	AccessLevel   string   `json:"access_level"` // global | department | user
	DepartmentIDs []int64  `json:"department_ids,omitempty"`
	UserUIDs      []string `json:"user_uids,omitempty"`
}

// ShareConfig is share_config version 2.
type ShareConfig struct {
	Version     int    `json:"version"`
	ReadScope   Scope  `json:"read_scope"`
	ManageScope *Scope `json:"manage_scope"`
}

// Parse decodes and validates a share_config. Empty input means "no config".
func Parse(raw json.RawMessage) (*ShareConfig, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var c ShareConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, failure.Unprocessable("invalid_share_config", "share_config is not valid: %v", err)
	}
	if c.Version != 2 {
		return nil, failure.Unprocessable("invalid_share_config", "share_config.version must be 2")
	}
	if err := c.ReadScope.validate(); err != nil {
		return nil, err
	}
	if c.ManageScope != nil {
		if err := c.ManageScope.validate(); err != nil {
			return nil, err
		}
		if !c.ManageScope.within(c.ReadScope) {
			return nil, failure.Unprocessable("invalid_share_config", "manage_scope must be within read_scope")
		}
	}
	return &c, nil
}

func (s Scope) validate() error {
	switch s.AccessLevel {
	case "global", "department", "user":
		return nil
	}
	return failure.Unprocessable("invalid_share_config", "access_level must be global, department or user")
}

// within reports whether every subject s admits is admitted by outer.
func (s Scope) within(outer Scope) bool {
	switch outer.AccessLevel {
	case "global":
		return true
	case "department":
		if s.AccessLevel == "global" {
			return false
		}
		if s.AccessLevel == "department" {
			for _, d := range s.DepartmentIDs {
				if !slices.Contains(outer.DepartmentIDs, d) {
					return false
				}
			}
		}
		return true // user-level scopes are checked per user at resolution time
	case "user":
		if s.AccessLevel != "user" {
			return false
		}
		for _, u := range s.UserUIDs {
			if !slices.Contains(outer.UserUIDs, u) {
				return false
			}
		}
		return true
	}
	return false
}

func (s Scope) admits(sub Subject) bool {
	switch s.AccessLevel {
	case "global":
		return true
	case "department":
		return sub.DepartmentID != nil && slices.Contains(s.DepartmentIDs, *sub.DepartmentID)
	case "user":
		return slices.Contains(s.UserUIDs, sub.UID)
	}
	return false
}

// Resolve returns sub's access to a resource created by createdBy with share
// config c, capped by ceiling (the most the subject's role may have).
func Resolve(sub Subject, createdBy string, c *ShareConfig, ceiling Level) Level {
	level := None
	switch {
	case sub.Role == "superadmin":
		level = Manage
	case createdBy != "" && createdBy == sub.UID:
		level = Manage
	case c == nil:
		level = Read
	case c.ManageScope != nil && c.ManageScope.admits(sub) && c.ReadScope.admits(sub):
		level = Manage
	case c.ReadScope.admits(sub):
		level = Read
	}
	if level > ceiling {
		level = ceiling
	}
	return level
}
