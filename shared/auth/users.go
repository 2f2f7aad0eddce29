package auth

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// User is a user's profile as the API shows it (never the password hash).
type User struct {
	ID             int64      `json:"id"`
	Username       string     `json:"username"`
	UID            string     `json:"uid"`
	PhoneNumber    *string    `json:"phone_number"`
	Avatar         *string    `json:"avatar"`
	Role           string     `json:"role"`
	DepartmentID   *int64     `json:"department_id"`
	DepartmentName *string    `json:"department_name"`
	CreatedAt      time.Time  `json:"created_at"`
	LastLogin      *time.Time `json:"last_login"`
}

// TokenResponse is what login and first-run initialization return.
type TokenResponse struct {
	AccessToken    string  `json:"access_token"`
	TokenType      string  `json:"token_type"`
	UserID         int64   `json:"user_id"`
	Username       string  `json:"username"`
	UID            string  `json:"uid"`
	PhoneNumber    *string `json:"phone_number"`
	Avatar         *string `json:"avatar"`
	Role           string  `json:"role"`
	DepartmentID   *int64  `json:"department_id"`
	DepartmentName *string `json:"department_name"`
}

// NewUser is an admin's request to create a user.
type NewUser struct {
	UID          string  `json:"uid"`
	Username     string  `json:"username"`
	Password     string  `json:"password"`
	Role         string  `json:"role"`
	DepartmentID *int64  `json:"department_id"`
	PhoneNumber  *string `json:"phone_number"`
}

// Errors of login and user management.
var (
	ErrInvalidCredentials = failure.Unauthorized("invalid_credentials", "incorrect login id or password")
	ErrAlreadyInitialized = failure.Conflict("already_initialized", "the instance already has an administrator")
	ErrAdminRequired      = failure.Forbidden("admin_required", "this action needs the admin role")
)

// DefaultDepartment is the seeded department new users join by default.
const DefaultDepartment = "default"

var (
	uidPattern   = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	phonePattern = regexp.MustCompile(`^\+?[0-9]{5,20}$`)
)

const maxUsernameLen = 64

func validateUID(uid string) error {
	if !uidPattern.MatchString(uid) {
		return failure.Unprocessable("invalid_uid", "uid must be 1 to 64 characters of letters, digits, '_', '.' or '-'")
	}
	return nil
}

func normalizeUsername(username, uid string) (string, error) {
	username = strings.TrimSpace(username)
	if username == "" {
		username = uid
	}
	if utf8.RuneCountInString(username) > maxUsernameLen || !utf8.ValidString(username) {
		return "", failure.Unprocessable("invalid_username", "username must be at most %d characters", maxUsernameLen)
	}
	return username, nil
}

// userRow is a users row joined with its department's name.
type userRow struct {
	User
	PasswordHash string
	FailedCount  int
	LockedUntil  *time.Time
	IsDeleted    bool
	TokenVersion int
}

const userSelect = `SELECT u.id, u.uid, u.username, u.phone_number, u.avatar, u.role, u.department_id, d.name,
	u.created_at, u.last_login, u.password_hash, u.login_failed_count, u.login_locked_until, u.is_deleted,
	u.token_version
	FROM users u LEFT JOIN departments d ON d.id = u.department_id `

func scanUser(row pgx.Row) (userRow, error) {
	var u userRow
	err := row.Scan(&u.ID, &u.UID, &u.Username, &u.PhoneNumber, &u.Avatar, &u.Role, &u.DepartmentID, &u.DepartmentName,
		&u.CreatedAt, &u.LastLogin, &u.PasswordHash, &u.FailedCount, &u.LockedUntil, &u.IsDeleted,
		&u.TokenVersion)
	u.CreatedAt, u.LastLogin = u.CreatedAt.UTC(), utcPtr(u.LastLogin)
	return u, err
}

func (s *Service) loadUser(ctx context.Context, db postgres.DB, id int64) (userRow, error) {
	return scanUser(db.QueryRow(ctx, userSelect+`WHERE u.id = $1`, id))
}

func (u userRow) principal() Principal {
	return Principal{UserID: u.ID, UID: u.UID, Username: u.Username, Role: u.Role, DepartmentID: u.DepartmentID}
}

func (u userRow) token(accessToken string) TokenResponse {
	return TokenResponse{
		AccessToken: accessToken, TokenType: "bearer",
		UserID: u.ID, Username: u.Username, UID: u.UID, PhoneNumber: u.PhoneNumber, Avatar: u.Avatar,
		Role: u.Role, DepartmentID: u.DepartmentID, DepartmentName: u.DepartmentName,
	}
}

// FirstRun reports whether no user exists yet (the UI then offers Initialize).
func (s *Service) FirstRun(ctx context.Context) (bool, error) {
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users)`).Scan(&exists); err != nil {
		return false, fmt.Errorf("check first run: %w", err)
	}
	return !exists, nil
}

// Initialize creates the first superadmin (in the default department) and
// logs it in. Exactly one call ever succeeds: the winner inserts the
// instance_state singleton in the same transaction as the user, so concurrent
// or later calls get 409 already_initialized and leave no rows behind.
func (s *Service) Initialize(ctx context.Context, uid, password, username string) (TokenResponse, error) {
	uid = strings.TrimSpace(uid)
	if err := validateUID(uid); err != nil {
		return TokenResponse{}, err
	}
	if err := validatePassword(password); err != nil {
		return TokenResponse{}, err
	}
	username, err := normalizeUsername(username, uid)
	if err != nil {
		return TokenResponse{}, err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return TokenResponse{}, err
	}
	var id int64
	err = postgres.Tx(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO instance_state (id) VALUES (1) ON CONFLICT (id) DO NOTHING`)
		if err != nil {
			return fmt.Errorf("claim initialization: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return ErrAlreadyInitialized
		}
		var anyUser bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users)`).Scan(&anyUser); err != nil {
			return fmt.Errorf("check existing users: %w", err)
		}
		if anyUser {
			return ErrAlreadyInitialized
		}
		return tx.QueryRow(ctx, `INSERT INTO users (uid, username, password_hash, role, department_id)
			VALUES ($1, $2, $3, $4, (SELECT id FROM departments WHERE name = $5)) RETURNING id`,
			uid, username, hash, RoleSuperadmin, DefaultDepartment).Scan(&id)
	})
	if err != nil {
		if _, ok := failure.As(err); ok {
			return TokenResponse{}, err
		}
		return TokenResponse{}, fmt.Errorf("initialize superadmin: %w", err)
	}
	u, err := s.loadUser(ctx, s.pool, id)
	if err != nil {
		return TokenResponse{}, fmt.Errorf("load new superadmin: %w", err)
	}
	tok, err := s.issueToken(u, nil, "")
	if err != nil {
		return TokenResponse{}, err
	}
	return u.token(tok), nil
}

// Login checks a password for the user whose uid or phone number is login.
//
// Lockout: each wrong password increments login_failed_count; the failure
// that reaches LockThreshold locks the account for LockDuration (423). While
// locked, even the right password gets 423. The first attempt after a lock
// expires starts from a zero counter. Success resets the counter and sets
// last_login. The read-modify-write holds the user's row lock, so concurrent
// wrong guesses are all counted.
func (s *Service) Login(ctx context.Context, login, password string) (TokenResponse, error) {
	return s.LoginFrom(ctx, login, password, "")
}

// LoginFrom is Login by a client at address client (the edge resolves it,
// trusting X-Forwarded-For only from configured proxies). Failures are
// counted per (login, client) and lock only that pair (throttle.go); the
// account's sessions and API keys are never locked by them.
func (s *Service) LoginFrom(ctx context.Context, login, password, client string) (TokenResponse, error) {
	login = strings.TrimSpace(login)
	if login == "" || password == "" {
		return TokenResponse{}, failure.Unprocessable("missing_credentials", "username and password are required")
	}
	if err := s.limitAddress(ctx, client); err != nil {
		return TokenResponse{}, err
	}
	key := throttleKey(login)
	var (
		u       userRow
		outcome error
	)
	err := postgres.Tx(ctx, s.pool, func(tx pgx.Tx) error {
		now := s.now()
		locked, err := throttleState(ctx, tx, key, client, now)
		if err != nil {
			return err
		}
		if locked > 0 {
			outcome = loginLockedError(locked)
			return nil
		}
		fail := func() error {
			outcome = ErrInvalidCredentials
			d, err := s.throttleFail(ctx, tx, key, client, now)
			if d > 0 {
				outcome = loginLockedError(d)
			}
			return err
		}
		u, err = scanUser(tx.QueryRow(ctx, userSelect+`WHERE (u.uid = $1 OR u.phone_number = $1) AND NOT u.is_deleted
			ORDER BY (u.uid = $1) DESC LIMIT 1 FOR UPDATE OF u`, login))
		if errors.Is(err, pgx.ErrNoRows) {
			_, _ = VerifyPassword(s.dummyPasswordHash(), password) // same cost as a real check
			return fail()
		}
		if err != nil {
			return fmt.Errorf("find user: %w", err)
		}
		ok, err := VerifyPassword(u.PasswordHash, password)
		if err != nil {
			return fmt.Errorf("verify password of user %d: %w", u.ID, err)
		}
		if !ok {
			// The account's own counters are informational (the original's
			// columns); they never lock it.
			if _, err := tx.Exec(ctx, `UPDATE users SET login_failed_count = login_failed_count + 1, last_failed_login = $2
				WHERE id = $1`, u.ID, now); err != nil {
				return err
			}
			return fail()
		}
		u.FailedCount, u.LockedUntil, u.LastLogin = 0, nil, &now
		if _, err := tx.Exec(ctx, `UPDATE users SET login_failed_count = 0, login_locked_until = NULL, last_login = $2
			WHERE id = $1`, u.ID, now); err != nil {
			return err
		}
		return throttleSucceed(ctx, tx, key, client)
	})
	if err != nil {
		return TokenResponse{}, fmt.Errorf("login: %w", err)
	}
	if outcome != nil {
		return TokenResponse{}, outcome
	}
	tok, err := s.issueToken(u, nil, "")
	if err != nil {
		return TokenResponse{}, err
	}
	return u.token(tok), nil
}

// Me returns the caller's own profile.
func (s *Service) Me(ctx context.Context, p Principal) (User, error) {
	u, err := s.loadUser(ctx, s.pool, p.UserID)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && u.IsDeleted) {
		return User{}, failure.NotFound("user_not_found", "user not found")
	}
	if err != nil {
		return User{}, fmt.Errorf("load user %d: %w", p.UserID, err)
	}
	return u.User, nil
}

// CreateUser creates a user on behalf of an admin. Role ceiling: an admin may
// create plain users in its own department only; a superadmin may create
// users and admins in any department (default: the default department).
// Superadmins are never created here.
func (s *Service) CreateUser(ctx context.Context, actor Principal, in NewUser) (User, error) {
	if !actor.IsAdmin() {
		return User{}, ErrAdminRequired
	}
	uid := strings.TrimSpace(in.UID)
	if err := validateUID(uid); err != nil {
		return User{}, err
	}
	username, err := normalizeUsername(in.Username, uid)
	if err != nil {
		return User{}, err
	}
	if err := validatePassword(in.Password); err != nil {
		return User{}, err
	}
	role := in.Role
	if role == "" {
		role = RoleUser
	}
	switch role {
	case RoleUser:
	case RoleAdmin:
		if !actor.IsSuperadmin() {
			return User{}, failure.Forbidden("role_forbidden", "only a superadmin may create admins")
		}
	default:
		return User{}, failure.Unprocessable("invalid_role", "role must be %q or %q", RoleUser, RoleAdmin)
	}
	var phone *string
	if in.PhoneNumber != nil && strings.TrimSpace(*in.PhoneNumber) != "" {
		p := strings.TrimSpace(*in.PhoneNumber)
		if !phonePattern.MatchString(p) {
			return User{}, failure.Unprocessable("invalid_phone_number", "phone number must be 5 to 20 digits, optionally starting with '+'")
		}
		phone = &p
	}
	deptID := in.DepartmentID
	if !actor.IsSuperadmin() {
		if actor.DepartmentID == nil {
			return User{}, failure.Forbidden("department_required", "an admin must belong to a department to create users")
		}
		// As the original (普通管理员不能指定部门): an admin's users join its
		// department; naming one, even its own, is refused, so that a
		// client cannot learn department ids by probing.
		if deptID != nil {
			return User{}, failure.Forbidden("department_forbidden", "an admin may not name a department: its users join its own")
		}
		deptID = actor.DepartmentID
	}
	hash, err := HashPassword(in.Password)
	if err != nil {
		return User{}, err
	}
	var id int64
	err = postgres.Tx(ctx, s.pool, func(tx pgx.Tx) error {
		if deptID == nil {
			err := tx.QueryRow(ctx, `SELECT id FROM departments WHERE name = $1`, DefaultDepartment).Scan(&deptID)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("find default department: %w", err)
			}
		} else {
			var ok bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM departments WHERE id = $1)`, *deptID).Scan(&ok); err != nil {
				return fmt.Errorf("check department: %w", err)
			}
			if !ok {
				return failure.Unprocessable("department_not_found", "department %d does not exist", *deptID)
			}
		}
		err := tx.QueryRow(ctx, `INSERT INTO users (uid, username, phone_number, password_hash, role, department_id)
			VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`, uid, username, phone, hash, role, deptID).Scan(&id)
		switch {
		case postgres.IsUniqueViolation(err, "users_uid_key"):
			return failure.Conflict("uid_taken", "uid %q is already taken", uid)
		case postgres.IsUniqueViolation(err, "users_phone_number_key"):
			return failure.Conflict("phone_taken", "phone number is already in use")
		}
		return err
	})
	if err != nil {
		if _, ok := failure.As(err); ok {
			return User{}, err
		}
		return User{}, fmt.Errorf("create user %q: %w", uid, err)
	}
	u, err := s.loadUser(ctx, s.pool, id)
	if err != nil {
		return User{}, fmt.Errorf("load new user: %w", err)
	}
	return u.User, nil
}

// ListUsers lists active users an admin manages: all of them for a
// superadmin, the admin's own department otherwise. Ordered by id.
func (s *Service) ListUsers(ctx context.Context, actor Principal, skip, limit int) ([]User, error) {
	if !actor.IsAdmin() {
		return nil, ErrAdminRequired
	}
	if skip < 0 || limit < 1 || limit > 1000 {
		return nil, failure.Unprocessable("invalid_pagination", "skip must be >= 0 and limit between 1 and 1000")
	}
	var dept *int64
	if !actor.IsSuperadmin() {
		if actor.DepartmentID == nil {
			return []User{}, nil
		}
		dept = actor.DepartmentID
	}
	rows, err := s.pool.Query(ctx, userSelect+`WHERE NOT u.is_deleted AND ($1::bigint IS NULL OR u.department_id = $1)
		ORDER BY u.id OFFSET $2 LIMIT $3`, dept, skip, limit)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	defer rows.Close()
	out := []User{}
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
		out = append(out, u.User)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return out, nil
}
