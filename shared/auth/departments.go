package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// Department is a department as the API shows it.
type Department struct {
	ID          int64     `json:"id"`
	Name        string    `json:"name"`
	Description *string   `json:"description"`
	CreatedAt   time.Time `json:"created_at"`
	UserCount   int       `json:"user_count"`
}

// NewDepartment creates a department together with its first admin (the
// original's DepartmentCreate).
type NewDepartment struct {
	Name          string  `json:"name"`
	Description   *string `json:"description"`
	AdminUID      string  `json:"admin_uid"`
	AdminPassword string  `json:"admin_password"`
	AdminPhone    *string `json:"admin_phone"`
}

// DepartmentUpdate renames or re-describes a department; nil leaves a field.
type DepartmentUpdate struct {
	Name        *string `json:"name"`
	Description *string `json:"description"`
}

// Department limits (the original's column sizes).
const (
	maxDepartmentName        = 50
	maxDepartmentDescription = 255
)

// ErrDepartmentNotFound is the answer for a department id that does not exist.
var ErrDepartmentNotFound = failure.NotFound("department_not_found", "department not found")

const departmentSelect = `SELECT d.id, d.name, NULLIF(d.description, ''), d.created_at,
	(SELECT count(*) FROM users u WHERE u.department_id = d.id AND NOT u.is_deleted) FROM departments d `

func scanDepartment(row pgx.Row) (Department, error) {
	var d Department
	err := row.Scan(&d.ID, &d.Name, &d.Description, &d.CreatedAt, &d.UserCount)
	d.CreatedAt = d.CreatedAt.UTC()
	return d, err
}

func normalizeDepartmentName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" || !utf8.ValidString(name) || utf8.RuneCountInString(name) > maxDepartmentName || strings.ContainsRune(name, 0) {
		return "", failure.Unprocessable("invalid_department_name", "department name must be 1 to %d characters", maxDepartmentName)
	}
	return name, nil
}

func normalizeDescription(d *string) (string, error) {
	if d == nil {
		return "", nil
	}
	s := strings.TrimSpace(*d)
	if !utf8.ValidString(s) || utf8.RuneCountInString(s) > maxDepartmentDescription || strings.ContainsRune(s, 0) {
		return "", failure.Unprocessable("invalid_description", "description must be at most %d characters", maxDepartmentDescription)
	}
	return s, nil
}

// ListDepartments lists every department with its number of active users
// (any admin may list them, as the original: share pickers name them).
func (s *Service) ListDepartments(ctx context.Context, actor Principal) ([]Department, error) {
	if !actor.IsAdmin() {
		return nil, ErrAdminRequired
	}
	rows, err := s.pool.Query(ctx, departmentSelect+`ORDER BY d.id`)
	if err != nil {
		return nil, fmt.Errorf("list departments: %w", err)
	}
	defer rows.Close()
	out := []Department{}
	for rows.Next() {
		d, err := scanDepartment(rows)
		if err != nil {
			return nil, fmt.Errorf("list departments: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

func requireSuperadmin(actor Principal) error {
	if !actor.IsSuperadmin() {
		return failure.Forbidden("superadmin_required", "this action needs the superadmin role")
	}
	return nil
}

// GetDepartment returns one department (superadmin).
func (s *Service) GetDepartment(ctx context.Context, actor Principal, id int64) (Department, error) {
	if err := requireSuperadmin(actor); err != nil {
		return Department{}, err
	}
	return s.loadDepartment(ctx, s.pool, id)
}

func (s *Service) loadDepartment(ctx context.Context, db postgres.DB, id int64) (Department, error) {
	d, err := scanDepartment(db.QueryRow(ctx, departmentSelect+`WHERE d.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Department{}, ErrDepartmentNotFound
	}
	if err != nil {
		return Department{}, fmt.Errorf("load department %d: %w", id, err)
	}
	return d, nil
}

// CreateDepartment creates a department and its admin in one transaction
// (superadmin): either both exist afterwards or neither.
func (s *Service) CreateDepartment(ctx context.Context, actor Principal, in NewDepartment) (Department, error) {
	if err := requireSuperadmin(actor); err != nil {
		return Department{}, err
	}
	name, err := normalizeDepartmentName(in.Name)
	if err != nil {
		return Department{}, err
	}
	desc, err := normalizeDescription(in.Description)
	if err != nil {
		return Department{}, err
	}
	uid := strings.TrimSpace(in.AdminUID)
	if err := validateUID(uid); err != nil {
		return Department{}, err
	}
	if err := validatePassword(in.AdminPassword); err != nil {
		return Department{}, err
	}
	phone, err := normalizePhone(in.AdminPhone)
	if err != nil {
		return Department{}, err
	}
	hash, err := HashPassword(in.AdminPassword)
	if err != nil {
		return Department{}, err
	}
	var id int64
	err = postgres.Tx(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO departments (name, description) VALUES ($1, $2) RETURNING id`, name, desc).Scan(&id)
		if postgres.IsUniqueViolation(err, "departments_name_key") {
			return failure.Conflict("department_name_taken", "a department named %q exists", name)
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO users (uid, username, phone_number, password_hash, role, department_id)
			VALUES ($1, $1, $2, $3, $4, $5)`, uid, phone, hash, RoleAdmin, id)
		return userConflict(err, uid)
	})
	if err != nil {
		if _, ok := failure.As(err); ok {
			return Department{}, err
		}
		return Department{}, fmt.Errorf("create department %q: %w", name, err)
	}
	return s.loadDepartment(ctx, s.pool, id)
}

// userConflict maps the users table's unique violations to coded errors.
func userConflict(err error, uid string) error {
	switch {
	case postgres.IsUniqueViolation(err, "users_uid_key"):
		return failure.Conflict("uid_taken", "uid %q is already taken", uid)
	case postgres.IsUniqueViolation(err, "users_phone_number_key"):
		return failure.Conflict("phone_taken", "phone number is already in use")
	}
	return err
}

// UpdateDepartment renames or re-describes a department (superadmin).
func (s *Service) UpdateDepartment(ctx context.Context, actor Principal, id int64, in DepartmentUpdate) (Department, error) {
	if err := requireSuperadmin(actor); err != nil {
		return Department{}, err
	}
	var name *string
	if in.Name != nil && strings.TrimSpace(*in.Name) != "" {
		n, err := normalizeDepartmentName(*in.Name)
		if err != nil {
			return Department{}, err
		}
		name = &n
	}
	var desc *string
	if in.Description != nil {
		d, err := normalizeDescription(in.Description)
		if err != nil {
			return Department{}, err
		}
		desc = &d
	}
	tag, err := s.pool.Exec(ctx, `UPDATE departments SET name = COALESCE($2, name), description = COALESCE($3, description)
		WHERE id = $1`, id, name, desc)
	if postgres.IsUniqueViolation(err, "departments_name_key") {
		return Department{}, failure.Conflict("department_name_taken", "a department named %q exists", *name)
	}
	if err != nil {
		return Department{}, fmt.Errorf("update department %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return Department{}, ErrDepartmentNotFound
	}
	return s.loadDepartment(ctx, s.pool, id)
}

// DeleteDepartment deletes a department (superadmin). Its users move to the
// default department, which cannot be deleted; API keys bound to it are
// revoked (the original deleted them; a tombstone keeps replays from
// resurrecting them).
func (s *Service) DeleteDepartment(ctx context.Context, actor Principal, id int64) (moved int, err error) {
	if err := requireSuperadmin(actor); err != nil {
		return 0, err
	}
	var movedIDs []int64
	err = postgres.Tx(ctx, s.pool, func(tx pgx.Tx) error {
		var name string
		err := tx.QueryRow(ctx, `SELECT name FROM departments WHERE id = $1 FOR UPDATE`, id).Scan(&name)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrDepartmentNotFound
		}
		if err != nil {
			return err
		}
		if name == DefaultDepartment {
			return failure.Unprocessable("default_department", "the default department cannot be deleted")
		}
		rows, err := tx.Query(ctx, `UPDATE users SET department_id = (SELECT id FROM departments WHERE name = $2), updated_at = now()
			WHERE department_id = $1 RETURNING id`, id, DefaultDepartment)
		if err != nil {
			return fmt.Errorf("move users: %w", err)
		}
		movedIDs, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return fmt.Errorf("move users: %w", err)
		}
		moved = len(movedIDs)
		if _, err := tx.Exec(ctx, `UPDATE api_keys SET is_enabled = false, revoked_at = COALESCE(revoked_at, $2),
			department_id = NULL, updated_at = now() WHERE department_id = $1`, id, s.now()); err != nil {
			return fmt.Errorf("revoke department keys: %w", err)
		}
		_, err = tx.Exec(ctx, `DELETE FROM departments WHERE id = $1`, id)
		return err
	})
	if err != nil {
		if _, ok := failure.As(err); ok {
			return 0, err
		}
		return 0, fmt.Errorf("delete department %d: %w", id, err)
	}
	for _, uid := range movedIDs { // their department changed; their department's keys are revoked
		s.InvalidateUser(ctx, uid)
	}
	return moved, nil
}
