package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// ErrUserNotFound answers ids of users that do not exist, are deleted, or
// sit outside an admin's department: the caller cannot tell these apart.
var ErrUserNotFound = failure.NotFound("user_not_found", "user not found")

// UserUpdate is an admin's change to a user; nil leaves a field unchanged,
// an empty phone number or avatar clears it.
type UserUpdate struct {
	Username     *string `json:"username"`
	Password     *string `json:"password"`
	PhoneNumber  *string `json:"phone_number"`
	Avatar       *string `json:"avatar"`
	DepartmentID *int64  `json:"department_id"`
	// Role is user or admin; only a superadmin changes it (never a
	// superadmin's own).
	Role *string `json:"role"`
}

// ProfileUpdate is a user's change to their own profile.
type ProfileUpdate struct {
	Username    *string `json:"username"`
	PhoneNumber *string `json:"phone_number"`
}

// AccessOption is a user as share pickers show it.
type AccessOption struct {
	UID            string  `json:"uid"`
	Username       string  `json:"username"`
	Role           string  `json:"role"`
	DepartmentID   *int64  `json:"department_id"`
	DepartmentName *string `json:"department_name"`
}

// UIDSuggestion answers validate-username.
type UIDSuggestion struct {
	Username    string `json:"username"`
	UID         string `json:"uid"`
	IsAvailable bool   `json:"is_available"`
}

func normalizePhone(p *string) (*string, error) {
	if p == nil || strings.TrimSpace(*p) == "" {
		return nil, nil
	}
	v := strings.TrimSpace(*p)
	if !phonePattern.MatchString(v) {
		return nil, failure.Unprocessable("invalid_phone_number", "phone number must be 5 to 20 digits, optionally starting with '+'")
	}
	return &v, nil
}

// usernameUpdate is an update's username: nil (not given) leaves it
// unchanged; a given one must normalize to 1 to maxUsernameLen characters.
func usernameUpdate(name *string) (*string, error) {
	if name == nil {
		return nil, nil
	}
	n, err := normalizeUsername(*name, "")
	if err != nil || n == "" || strings.ContainsRune(n, 0) {
		return nil, failure.Unprocessable("invalid_username", "username must be 1 to %d characters", maxUsernameLen)
	}
	return &n, nil
}

// phoneUpdate is an update's phone number: nil (not given) leaves it
// unchanged, a blank one becomes "" (the update clears it), any other is
// normalized.
func phoneUpdate(p *string) (*string, error) {
	if p == nil {
		return nil, nil
	}
	v, err := normalizePhone(p)
	if err != nil {
		return nil, err
	}
	if v == nil {
		v = new(string)
	}
	return v, nil
}

// managedUser loads an active user the actor may manage, locked FOR UPDATE
// in tx: a superadmin manages everyone; an admin only its own department's
// users (others are not found).
func (s *Service) managedUser(ctx context.Context, tx pgx.Tx, actor Principal, id int64) (userRow, error) {
	if !actor.IsAdmin() {
		return userRow{}, ErrAdminRequired
	}
	u, err := scanUser(tx.QueryRow(ctx, userSelect+`WHERE u.id = $1 FOR UPDATE OF u`, id))
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && u.IsDeleted) {
		return userRow{}, ErrUserNotFound
	}
	if err != nil {
		return userRow{}, fmt.Errorf("load user %d: %w", id, err)
	}
	if !actor.IsSuperadmin() && (actor.DepartmentID == nil || u.DepartmentID == nil || *u.DepartmentID != *actor.DepartmentID) {
		return userRow{}, ErrUserNotFound
	}
	return u, nil
}

// GetUser returns a user the admin manages.
func (s *Service) GetUser(ctx context.Context, actor Principal, id int64) (User, error) {
	var u userRow
	err := postgres.Tx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		u, err = s.managedUser(ctx, tx, actor, id)
		return err
	})
	if err != nil {
		return User{}, err
	}
	return u.User, nil
}

// UpdateUser changes a user, with the original's ceilings: an admin changes
// only plain users of its own department and never their department; only a
// superadmin changes a superadmin; a department's only admin cannot be moved
// out of it nor demoted; only a superadmin changes a role (user or admin).
// A new password revokes the user's sessions.
func (s *Service) UpdateUser(ctx context.Context, actor Principal, id int64, in UserUpdate) (User, error) {
	if in.Role != nil {
		if *in.Role != RoleUser && *in.Role != RoleAdmin {
			return User{}, failure.Unprocessable("invalid_role", "role must be user or admin")
		}
		if !actor.IsSuperadmin() {
			return User{}, failure.Forbidden("role_forbidden", "only a superadmin may change a role")
		}
	}
	username, err := usernameUpdate(in.Username)
	if err != nil {
		return User{}, err
	}
	var hash *string
	if in.Password != nil {
		if err := validatePassword(*in.Password); err != nil {
			return User{}, err
		}
		h, err := HashPassword(*in.Password)
		if err != nil {
			return User{}, err
		}
		hash = &h
	}
	phone, err := phoneUpdate(in.PhoneNumber)
	if err != nil {
		return User{}, err
	}
	if in.Avatar != nil && (len(*in.Avatar) > 2048 || !utf8.ValidString(*in.Avatar) || strings.ContainsRune(*in.Avatar, 0)) {
		return User{}, failure.Unprocessable("invalid_avatar", "avatar must be a URL of at most 2048 bytes")
	}
	err = postgres.Tx(ctx, s.pool, func(tx pgx.Tx) error {
		u, err := s.managedUser(ctx, tx, actor, id)
		if err != nil {
			return err
		}
		if u.Role == RoleSuperadmin && !actor.IsSuperadmin() {
			return failure.Forbidden("user_forbidden", "only a superadmin may change a superadmin")
		}
		if !actor.IsSuperadmin() && u.Role != RoleUser {
			return failure.Forbidden("user_forbidden", "an admin may change plain users only")
		}
		if username != nil {
			if err := usernameFree(ctx, tx, *username, id); err != nil {
				return err
			}
		}
		role := u.Role
		if in.Role != nil && *in.Role != u.Role {
			if u.Role == RoleSuperadmin {
				return failure.Forbidden("user_forbidden", "a superadmin's role cannot change")
			}
			if err := notLastDepartmentAdmin(ctx, tx, u, id); err != nil {
				return err
			}
			role = *in.Role
		}
		dept := u.DepartmentID
		if in.DepartmentID != nil && (u.DepartmentID == nil || *in.DepartmentID != *u.DepartmentID) {
			if !actor.IsSuperadmin() {
				return failure.Forbidden("department_forbidden", "only a superadmin may move a user to another department")
			}
			var ok bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM departments WHERE id = $1)`, *in.DepartmentID).Scan(&ok); err != nil {
				return err
			}
			if !ok {
				return failure.Unprocessable("department_not_found", "department %d does not exist", *in.DepartmentID)
			}
			if err := notLastDepartmentAdmin(ctx, tx, u, id); err != nil {
				return err
			}
			dept = in.DepartmentID
		}
		_, err = tx.Exec(ctx, `UPDATE users SET username = COALESCE($2, username), password_hash = COALESCE($3, password_hash),
			phone_number = CASE WHEN $4::text IS NULL THEN phone_number ELSE NULLIF($4, '') END,
			avatar = CASE WHEN $5::text IS NULL THEN avatar ELSE NULLIF($5, '') END,
			department_id = $6, role = $7, token_version = token_version + CASE WHEN $3::text IS NULL THEN 0 ELSE 1 END,
			updated_at = now() WHERE id = $1`, id, username, hash, phone, in.Avatar, dept, role)
		return userConflict(err, u.UID)
	})
	if err != nil {
		if _, ok := failure.As(err); ok {
			return User{}, err
		}
		return User{}, fmt.Errorf("update user %d: %w", id, err)
	}
	s.InvalidateUser(ctx, id) // role, department or password may have changed
	u, err := s.loadUser(ctx, s.pool, id)
	if err != nil {
		return User{}, fmt.Errorf("load user %d: %w", id, err)
	}
	return u.User, nil
}

// notLastDepartmentAdmin refuses to take an admin out of its department (by
// demotion, a move or deletion) when no other admin would be left. The department's
// row is locked first (after the user's own row, which every user change
// locks first, so no two changes wait on each other in a cycle): two
// concurrent changes of its last two admins cannot both pass, the second
// counts again after the first commits.
func notLastDepartmentAdmin(ctx context.Context, tx pgx.Tx, u userRow, id int64) error {
	if u.Role != RoleAdmin || u.DepartmentID == nil {
		return nil
	}
	var others int
	if err := tx.QueryRow(ctx, `SELECT 1 FROM departments WHERE id = $1 FOR UPDATE`, *u.DepartmentID).Scan(new(int)); err != nil &&
		!errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("lock department %d: %w", *u.DepartmentID, err)
	}
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM users WHERE department_id = $1 AND role = 'admin'
		AND NOT is_deleted AND id <> $2`, *u.DepartmentID, id).Scan(&others); err != nil {
		return fmt.Errorf("count department admins: %w", err)
	}
	if others == 0 {
		return failure.Unprocessable("last_department_admin", "the user is the only admin of its department")
	}
	return nil
}

func usernameFree(ctx context.Context, db postgres.DB, username string, exceptID int64) error {
	var taken bool
	if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users WHERE username = $1 AND id <> $2 AND NOT is_deleted)`,
		username, exceptID).Scan(&taken); err != nil {
		return fmt.Errorf("check username: %w", err)
	}
	if taken {
		return failure.Conflict("username_taken", "username %q is already taken", username)
	}
	return nil
}

// DeleteUser soft-deletes a user: the row stays (its uid owns resources and
// cannot be reused), the profile is cleared, the password is unusable, every
// API key is revoked and every session ends (the token version moves on).
// Ceilings as the original: never a superadmin, never oneself, an admin
// deletes only plain users of its department; a department's only admin is not
// deleted (promote another first).
func (s *Service) DeleteUser(ctx context.Context, actor Principal, id int64) error {
	err := postgres.Tx(ctx, s.pool, func(tx pgx.Tx) error {
		u, err := s.managedUser(ctx, tx, actor, id)
		if err != nil {
			return err
		}
		switch {
		case u.Role == RoleSuperadmin:
			return failure.Forbidden("user_forbidden", "a superadmin cannot be deleted")
		case u.ID == actor.UserID:
			return failure.Unprocessable("cannot_delete_self", "you cannot delete your own account")
		case !actor.IsSuperadmin() && u.Role != RoleUser:
			return failure.Forbidden("user_forbidden", "an admin may delete plain users only")
		}
		if err := notLastDepartmentAdmin(ctx, tx, u, id); err != nil {
			return err
		}
		now := s.now()
		if _, err := tx.Exec(ctx, `UPDATE users SET is_deleted = true, deleted_at = $2, username = $3, phone_number = NULL,
			avatar = NULL, password_hash = 'DELETED', token_version = token_version + 1, updated_at = now() WHERE id = $1`,
			id, now, "deleted-user-"+strconv.FormatInt(id, 10)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE api_keys SET is_enabled = false, revoked_at = COALESCE(revoked_at, $2), updated_at = now()
			WHERE user_id = $1`, id, now)
		return err
	})
	if err != nil {
		if _, ok := failure.As(err); ok {
			return err
		}
		return fmt.Errorf("delete user %d: %w", id, err)
	}
	s.InvalidateUser(ctx, id) // sessions and API keys end in every process now
	return nil
}

// AccessOptions lists the users an admin may name in share scopes: every
// active user for a superadmin, the admin's own department otherwise.
func (s *Service) AccessOptions(ctx context.Context, actor Principal, skip, limit int) ([]AccessOption, error) {
	users, err := s.ListUsers(ctx, actor, skip, limit)
	if err != nil {
		return nil, err
	}
	out := make([]AccessOption, 0, len(users))
	for _, u := range users {
		out = append(out, AccessOption{UID: u.UID, Username: u.Username, Role: u.Role, DepartmentID: u.DepartmentID, DepartmentName: u.DepartmentName})
	}
	return out, nil
}

// CheckUID reports whether uid is free (deleted users keep theirs); a
// string that is no valid uid is 422 invalid_uid.
func (s *Service) CheckUID(ctx context.Context, uid string) (bool, error) {
	if err := validateUID(uid); err != nil {
		return false, err
	}
	var taken bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users WHERE uid = $1)`, uid).Scan(&taken); err != nil {
		return false, fmt.Errorf("check uid: %w", err)
	}
	return !taken, nil
}

var uidUnsafe = regexp.MustCompile(`[^a-z0-9_]+`)

// ValidateUsername checks a display name (free, 2 to 20 characters of
// letters, digits, '_' or '-', as the original) and proposes a free uid
// derived from it.
func (s *Service) ValidateUsername(ctx context.Context, username string) (UIDSuggestion, error) {
	username = strings.TrimSpace(username)
	n := utf8.RuneCountInString(username)
	if n < 2 || n > 20 || !utf8.ValidString(username) {
		return UIDSuggestion{}, failure.Unprocessable("invalid_username", "username must be 2 to 20 characters")
	}
	for _, r := range username {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' && r != '-' {
			return UIDSuggestion{}, failure.Unprocessable("invalid_username", "username may hold letters, digits, '_' and '-' only")
		}
	}
	if err := usernameFree(ctx, s.pool, username, 0); err != nil {
		return UIDSuggestion{}, err
	}
	base := strings.Trim(uidUnsafe.ReplaceAllString(strings.ToLower(username), "_"), "_")
	if len(base) < 3 {
		b := make([]byte, 3)
		_, _ = rand.Read(b)
		base = strings.TrimPrefix(base+"_user_"+hex.EncodeToString(b), "_")
	}
	if len(base) > 20 {
		base = base[:20]
	}
	for i := 1; i < 1000; i++ {
		cand := base
		if i > 1 {
			cand = fmt.Sprintf("%s_%d", base, i)
		}
		free, err := s.CheckUID(ctx, cand)
		if err != nil {
			return UIDSuggestion{}, err
		}
		if free {
			return UIDSuggestion{Username: username, UID: cand, IsAvailable: true}, nil
		}
	}
	return UIDSuggestion{}, failure.Conflict("uid_exhausted", "no free uid derives from %q; choose one", username)
}

// UpdateProfile changes the caller's own display name and phone number.
func (s *Service) UpdateProfile(ctx context.Context, p Principal, in ProfileUpdate) (User, error) {
	username, err := usernameUpdate(in.Username)
	if err != nil {
		return User{}, err
	}
	phone, err := phoneUpdate(in.PhoneNumber)
	if err != nil {
		return User{}, err
	}
	err = postgres.Tx(ctx, s.pool, func(tx pgx.Tx) error {
		if username != nil {
			if err := usernameFree(ctx, tx, *username, p.UserID); err != nil {
				return err
			}
		}
		tag, err := tx.Exec(ctx, `UPDATE users SET username = COALESCE($2, username),
			phone_number = CASE WHEN $3::text IS NULL THEN phone_number ELSE NULLIF($3, '') END, updated_at = now()
			WHERE id = $1 AND NOT is_deleted`, p.UserID, username, phone)
		if err == nil && tag.RowsAffected() == 0 {
			return ErrUserNotFound
		}
		return userConflict(err, p.UID)
	})
	if err != nil {
		if _, ok := failure.As(err); ok {
			return User{}, err
		}
		return User{}, fmt.Errorf("update profile of %d: %w", p.UserID, err)
	}
	return s.Me(ctx, p)
}

// SetAvatar records the caller's new avatar URL.
func (s *Service) SetAvatar(ctx context.Context, p Principal, url string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE users SET avatar = $2, updated_at = now() WHERE id = $1 AND NOT is_deleted`, p.UserID, url)
	if err != nil {
		return fmt.Errorf("set avatar of %d: %w", p.UserID, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrUserNotFound
	}
	return nil
}

// ImpersonationTTL bounds an impersonation token's life.
const ImpersonationTTL = time.Hour

// Impersonate issues the superadmin a token acting as another (active,
// non-superadmin) user. The token names the superadmin in its "act" claim,
// expires after ImpersonationTTL, and is recorded in impersonation_audit
// (actor, target, token id, client address) before it is returned.
func (s *Service) Impersonate(ctx context.Context, actor Principal, targetID int64, clientAddress string) (TokenResponse, error) {
	if err := requireSuperadmin(actor); err != nil {
		return TokenResponse{}, err
	}
	if actor.ImpersonatorID != nil {
		return TokenResponse{}, failure.Forbidden("impersonation_forbidden", "an impersonation token cannot impersonate")
	}
	u, err := s.loadUser(ctx, s.pool, targetID)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && u.IsDeleted) {
		return TokenResponse{}, ErrUserNotFound
	}
	if err != nil {
		return TokenResponse{}, fmt.Errorf("load user %d: %w", targetID, err)
	}
	if u.Role == RoleSuperadmin {
		return TokenResponse{}, failure.Forbidden("impersonation_forbidden", "a superadmin cannot be impersonated")
	}
	idb, err := randomBytes(16)
	if err != nil {
		return TokenResponse{}, err
	}
	tokenID := hex.EncodeToString(idb)
	if len(clientAddress) > 200 || !utf8.ValidString(clientAddress) {
		clientAddress = ""
	}
	now := s.now()
	ttl := min(ImpersonationTTL, s.cfg.TokenTTL)
	if _, err := s.pool.Exec(ctx, `INSERT INTO impersonation_audit (actor_user_id, target_user_id, token_id, client_address, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, actor.UserID, u.ID, tokenID, clientAddress, now, now.Add(ttl)); err != nil {
		return TokenResponse{}, fmt.Errorf("audit impersonation: %w", err)
	}
	tok, err := s.issueTokenTTL(u, &tokenActor{Subject: strconv.FormatInt(actor.UserID, 10), UID: actor.UID}, tokenID, ttl)
	if err != nil {
		return TokenResponse{}, err
	}
	return u.token(tok), nil
}
