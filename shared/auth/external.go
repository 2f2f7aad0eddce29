package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// ExternalIdentity is a person an identity provider vouched for (verified
// by the caller: shared/oidc checks the ID token before it gets here).
type ExternalIdentity struct {
	Issuer                string
	Subject               string
	Username              string // the username claim (the uid in raw-username mode)
	Name                  string
	DepartmentName        string // read only when ExternalPolicy.FetchDepartment
	DepartmentDescription string
}

// ExternalPolicy is how external identities map to users (the original's
// OIDC_* options).
type ExternalPolicy struct {
	// UseRawUsername binds the identity to the existing user whose uid is
	// its username (or creates that uid); otherwise users get a uid of
	// their own derived from issuer and subject.
	UseRawUsername bool
	// AutoCreateUser creates a user for an unknown identity.
	AutoCreateUser bool
	// DefaultRole of created users: user or admin (never superadmin).
	DefaultRole string
	// DefaultDepartment is the department of created users (created if missing).
	DefaultDepartment string
	// FetchDepartment puts created users in the identity's department
	// (created if missing), falling back to DefaultDepartment.
	FetchDepartment bool
}

// LoginExternal finds or creates the user of an external identity and
// returns its id. Bindings live in oidc_identities: an identity bound to one
// user never signs in as another, and in raw-username mode a user already
// bound to another subject of the same issuer is refused.
func (s *Service) LoginExternal(ctx context.Context, id ExternalIdentity, pol ExternalPolicy) (int64, error) {
	if id.Issuer == "" || id.Subject == "" || len(id.Subject) > 255 || !utf8.ValidString(id.Subject) {
		return 0, failure.Unauthorized("oidc_identity_invalid", "the identity provider returned no usable subject")
	}
	role := pol.DefaultRole
	if role == "" {
		role = RoleUser
	}
	if role != RoleUser && role != RoleAdmin {
		return 0, fmt.Errorf("external login: default role %q is not user or admin", role)
	}
	var userID int64
	err := postgres.Tx(ctx, s.pool, func(tx pgx.Tx) error {
		var bound *int64
		err := tx.QueryRow(ctx, `SELECT user_id FROM oidc_identities WHERE issuer = $1 AND subject = $2 FOR UPDATE`,
			id.Issuer, id.Subject).Scan(&bound)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if bound != nil {
			u, err := s.loadUser(ctx, tx, *bound)
			if err != nil {
				return err
			}
			if u.IsDeleted {
				return failure.Forbidden("account_deleted", "this account has been deleted")
			}
			if pol.UseRawUsername && id.Username != "" && u.UID != id.Username {
				return failure.Conflict("oidc_binding_conflict", "this identity is bound to another account; ask an administrator")
			}
			userID = u.ID
		} else {
			uid := ""
			if pol.UseRawUsername {
				uid = strings.TrimSpace(id.Username)
				if err := validateUID(uid); err != nil {
					return failure.Unprocessable("oidc_username_invalid", "the identity's username is not a valid uid")
				}
				var existing int64
				var deleted bool
				err := tx.QueryRow(ctx, `SELECT id, is_deleted FROM users WHERE uid = $1 FOR UPDATE`, uid).Scan(&existing, &deleted)
				switch {
				case err == nil && deleted:
					return failure.Forbidden("account_deleted", "this account has been deleted")
				case err == nil:
					var other bool
					if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM oidc_identities WHERE issuer = $1 AND user_id = $2)`,
						id.Issuer, existing).Scan(&other); err != nil {
						return err
					}
					if other {
						return failure.Conflict("oidc_binding_conflict", "account %q is bound to another identity; ask an administrator", uid)
					}
					userID = existing
				case !errors.Is(err, pgx.ErrNoRows):
					return err
				}
			} else {
				sum := sha256.Sum256([]byte(id.Issuer + "\x00" + id.Subject))
				uid = "oidc-" + hex.EncodeToString(sum[:8])
			}
			if userID == 0 {
				if !pol.AutoCreateUser {
					return failure.Forbidden("oidc_user_not_found", "no account exists for this identity; ask an administrator")
				}
				if userID, err = s.createExternalUser(ctx, tx, uid, id, pol, role); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, `INSERT INTO oidc_identities (issuer, subject, user_id) VALUES ($1, $2, $3)`,
				id.Issuer, id.Subject, userID); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `UPDATE users SET last_login = $2 WHERE id = $1`, userID, s.now())
		return err
	})
	if err != nil {
		if _, ok := failure.As(err); ok {
			return 0, err
		}
		return 0, fmt.Errorf("external login: %w", err)
	}
	return userID, nil
}

func (s *Service) createExternalUser(ctx context.Context, tx pgx.Tx, uid string, id ExternalIdentity, pol ExternalPolicy, role string) (int64, error) {
	deptName, deptDesc := "", ""
	if pol.FetchDepartment {
		deptName = truncateRunes(strings.TrimSpace(id.DepartmentName), maxDepartmentName)
		deptDesc = truncateRunes(strings.TrimSpace(id.DepartmentDescription), maxDepartmentDescription)
	}
	if deptName == "" {
		deptName, deptDesc = truncateRunes(strings.TrimSpace(pol.DefaultDepartment), maxDepartmentName), ""
	}
	if deptName == "" {
		deptName = DefaultDepartment
	}
	if deptDesc == "" {
		deptDesc = deptName
	}
	var dept int64
	if err := tx.QueryRow(ctx, `INSERT INTO departments (name, description) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING id`, deptName, deptDesc).Scan(&dept); err != nil {
		return 0, fmt.Errorf("department %q: %w", deptName, err)
	}
	username := strings.TrimSpace(id.Name)
	if username == "" {
		username = strings.TrimSpace(id.Username)
	}
	if username == "" {
		username = uid
	}
	username = truncateRunes(username, maxUsernameLen-8)
	if err := usernameFree(ctx, tx, username, 0); err != nil {
		username = truncateRunes(username, maxUsernameLen-8) + "-" + uid[len(uid)-6:]
	}
	// The password is random and never told: the account signs in through
	// its identity provider (or after an admin sets a password).
	pw, err := randomBytes(24)
	if err != nil {
		return 0, err
	}
	hash, err := HashPassword(hex.EncodeToString(pw))
	if err != nil {
		return 0, err
	}
	var userID int64
	err = tx.QueryRow(ctx, `INSERT INTO users (uid, username, password_hash, role, department_id)
		VALUES ($1, $2, $3, $4, $5) RETURNING id`, uid, username, hash, role, dept).Scan(&userID)
	if err != nil {
		return 0, userConflict(err, uid)
	}
	return userID, nil
}

func truncateRunes(s string, n int) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// TokenFor signs an access token for an active user and returns it with
// the profile (the answer of a login completed elsewhere: OIDC).
func (s *Service) TokenFor(ctx context.Context, userID int64) (TokenResponse, error) {
	u, err := s.loadUser(ctx, s.pool, userID)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && u.IsDeleted) {
		return TokenResponse{}, ErrUserNotFound
	}
	if err != nil {
		return TokenResponse{}, fmt.Errorf("load user %d: %w", userID, err)
	}
	tok, err := s.issueToken(u, nil, "")
	if err != nil {
		return TokenResponse{}, err
	}
	return u.token(tok), nil
}
