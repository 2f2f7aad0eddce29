// Package auth is identity: users and roles, argon2id passwords with login
// lockout, HS256 JWTs, and API keys (yxkey_…, stored only as a hash). Its
// Service authenticates a bearer credential into a Principal that every other
// domain uses for authorization at the point of effect.
//
// Imported by: functions/intake and tools that act for a user.
// May import: shared/postgres, shared/failure, pgx, golang-jwt, x/crypto.
package auth

// Roles.
const (
	RoleSuperadmin = "superadmin"
	RoleAdmin      = "admin"
	RoleUser       = "user"
)

// Principal is an authenticated caller.
type Principal struct {
	UserID       int64  `json:"user_id"`
	UID          string `json:"uid"`
	Username     string `json:"username"`
	Role         string `json:"role"`
	DepartmentID *int64 `json:"department_id"`
	// APIKeyID is set when the caller authenticated with an API key.
	APIKeyID *int64 `json:"api_key_id,omitempty"`
	// ImpersonatorID is the superadmin acting through an impersonation token.
	ImpersonatorID *int64 `json:"impersonator_id,omitempty"`
}

// IsAdmin reports whether the principal has the admin or superadmin role.
func (p Principal) IsAdmin() bool { return p.Role == RoleAdmin || p.Role == RoleSuperadmin }

// IsSuperadmin reports whether the principal is a superadmin.
func (p Principal) IsSuperadmin() bool { return p.Role == RoleSuperadmin }
