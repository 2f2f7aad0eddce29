package thread

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
)

// Project groups a user's threads and owns a managed working folder,
// WorkdirPath ("projects/<id>", the original's value), made on the sandbox
// provisioner's volume in the owner's workspace when the project is
// created: every sandbox of the owner's threads sees it at
// /home/gem/user-data/workspace/projects/<id> (SandboxPath), and deleting
// the project removes it. The original's linked projects (any existing
// host folder) are refused: they would expose the host.
type Project struct {
	ID              string    `json:"id"`
	UID             string    `json:"uid"`
	Name            string    `json:"name"`
	SelectionStatus string    `json:"selection_status"` // implicit | selectable
	DirectoryMode   string    `json:"directory_mode"`   // managed
	WorkdirPath     string    `json:"workdir_path"`
	SandboxPath     string    `json:"sandbox_path"` // the folder as the project's sandboxes see it
	ThreadCount     int       `json:"thread_count"`
	CreatedAt       time.Time `json:"created_at"`
	UpdatedAt       time.Time `json:"updated_at"`
}

// ProjectInput is POST /api/projects.
type ProjectInput struct {
	Name           string  `json:"name"`
	DirectoryMode  string  `json:"directory_mode"` // managed (default) | linked (refused)
	WorkdirPath    *string `json:"workdir_path"`   // only for linked projects: refused
	IdempotencyKey *string `json:"idempotency_key"`
}

// Errors of projects.
var (
	ErrProjectNotFound = failure.NotFound("project_not_found", "project not found")
	// ErrLinkedProject: linked projects would mount any host folder into
	// sandboxes; only managed ones are served.
	ErrLinkedProject = failure.Unprocessable("linked_project_unsupported",
		"linked projects (an existing host folder) are not supported; create a managed project")
)

const projectCols = `p.id, p.uid, p.name, p.selection_status, p.directory_mode, p.workdir_path, p.created_at, p.updated_at,
	(SELECT count(*) FROM conversations c WHERE c.project_id = p.id AND c.status <> 'deleted')`

func scanProject(row pgx.Row) (Project, error) {
	var p Project
	err := row.Scan(&p.ID, &p.UID, &p.Name, &p.SelectionStatus, &p.DirectoryMode, &p.WorkdirPath, &p.CreatedAt, &p.UpdatedAt, &p.ThreadCount)
	p.SandboxPath = sandbox.ProjectDir(p.ID)
	return p, err
}

// ProjectFolders keeps projects' working folders on the sandbox
// provisioner's volume, through its authenticated API
// (sandbox.ProjectFolders).
type ProjectFolders interface {
	CreateProjectFolder(ctx context.Context, uid, projectID string) error
	RemoveProjectFolder(ctx context.Context, uid, projectID string) error
}

// WithProjectFolders returns a copy of s whose projects get their working
// folder through f.
func (s *Store) WithProjectFolders(f ProjectFolders) *Store {
	c := *s
	c.folders = f
	return &c
}

// CreateProject makes a managed project for uid, idempotent on (uid,
// idempotency_key): a replay with the same name answers the first project,
// another name is a 409.
func (s *Store) CreateProject(ctx context.Context, uid string, in ProjectInput) (Project, error) {
	switch in.DirectoryMode {
	case "", "managed":
	case "linked":
		return Project{}, ErrLinkedProject
	default:
		return Project{}, failure.Unprocessable("invalid_directory_mode", "directory_mode must be managed")
	}
	if in.WorkdirPath != nil && *in.WorkdirPath != "" {
		return Project{}, ErrLinkedProject
	}
	name := strings.TrimSpace(in.Name)
	if name == "" || len(name) > 200 {
		return Project{}, failure.Unprocessable("invalid_project", "name must be 1 to 200 bytes")
	}
	if in.IdempotencyKey != nil && (len(*in.IdempotencyKey) == 0 || len(*in.IdempotencyKey) > 64) {
		return Project{}, failure.Unprocessable("invalid_idempotency_key", "idempotency_key must be 1 to 64 characters")
	}
	id := newProjectID()
	// The row and the folder together: the folder is made before the row
	// commits, and a failure to make it rolls the row back (an empty folder
	// left by a failed commit is harmless and reused by no one).
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO projects (id, uid, name, workdir_path, idempotency_key) VALUES ($1, $2, $3, $4, $5)`,
			id, uid, name, "projects/"+id, in.IdempotencyKey); err != nil {
			return err
		}
		if s.folders == nil {
			return nil
		}
		if err := s.folders.CreateProjectFolder(ctx, uid, id); err != nil {
			return fmt.Errorf("create the project's folder: %w", err)
		}
		return nil
	})
	if postgres.IsUniqueViolation(err, "projects_uid_idempotency_key_key") {
		p, err := scanProject(s.pool.QueryRow(ctx, `SELECT `+projectCols+` FROM projects p WHERE p.uid = $1 AND p.idempotency_key = $2`,
			uid, *in.IdempotencyKey))
		if err != nil {
			return Project{}, fmt.Errorf("load project by idempotency key: %w", err)
		}
		if p.Name != name {
			return Project{}, failure.Conflict("idempotency_key_conflict", "idempotency_key was used for another project")
		}
		return p, nil
	}
	if _, coded := failure.As(err); coded {
		return Project{}, err // the provisioner's answer (sandbox_unavailable, …)
	}
	if err != nil {
		return Project{}, fmt.Errorf("create project: %w", err)
	}
	return s.Project(ctx, uid, id)
}

// DeleteProject deletes uid's project and its working folder. Its threads
// stay, outside any project. The folder is removed before the row commits:
// when the provisioner cannot remove it, nothing is deleted (a retry
// finishes the job; a folder already gone is no error).
func (s *Store) DeleteProject(ctx context.Context, uid, id string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var found string
		err := tx.QueryRow(ctx, `SELECT id FROM projects WHERE id = $1 AND uid = $2 FOR UPDATE`, id, uid).Scan(&found)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrProjectNotFound
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE conversations SET project_id = NULL WHERE project_id = $1 AND uid = $2`, id, uid); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM projects WHERE id = $1 AND uid = $2`, id, uid); err != nil {
			return err
		}
		if s.folders == nil {
			return nil
		}
		return s.folders.RemoveProjectFolder(ctx, uid, id)
	})
	if _, coded := failure.As(err); coded {
		return err
	}
	if err != nil {
		return fmt.Errorf("delete project: %w", err)
	}
	return nil
}

func newProjectID() string {
	b := []byte(newThreadID())
	// A UUID-shaped id, as the original's.
	return string(b[0:8]) + "-" + string(b[8:12]) + "-" + string(b[12:16]) + "-" + string(b[16:20]) + "-" + string(b[20:32])
}

// Project returns uid's project; another user's is ErrProjectNotFound.
func (s *Store) Project(ctx context.Context, uid, id string) (Project, error) {
	p, err := scanProject(s.pool.QueryRow(ctx, `SELECT `+projectCols+` FROM projects p WHERE p.id = $1 AND p.uid = $2`, id, uid))
	if errors.Is(err, pgx.ErrNoRows) {
		return Project{}, ErrProjectNotFound
	}
	if err != nil {
		return Project{}, fmt.Errorf("load project: %w", err)
	}
	return p, nil
}

// Projects lists the projects uid may choose for a thread, newest first.
func (s *Store) Projects(ctx context.Context, uid string) ([]Project, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+projectCols+` FROM projects p WHERE p.uid = $1 AND p.selection_status = 'selectable'
		ORDER BY p.updated_at DESC, p.id`, uid)
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	defer rows.Close()
	out := []Project{}
	for rows.Next() {
		p, err := scanProject(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// HistoryCandidate is a past conversation offered as a shortcut to its
// working folder (GET /api/projects/history-candidates).
type HistoryCandidate struct {
	ThreadID    string    `json:"thread_id"`
	Title       string    `json:"title"`
	AgentID     string    `json:"agent_id"`
	ProjectID   *string   `json:"project_id"`
	ProjectName *string   `json:"project_name"`
	WorkdirPath *string   `json:"workdir_path"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// HistoryCandidates lists uid's recent chat threads, newest first.
func (s *Store) HistoryCandidates(ctx context.Context, uid string, limit int) ([]HistoryCandidate, error) {
	if limit <= 0 || limit > 100 {
		limit = 20
	}
	rows, err := s.pool.Query(ctx, `SELECT c.thread_id, c.title, c.agent_id, c.project_id, p.name, p.workdir_path, c.updated_at
		FROM conversations c LEFT JOIN projects p ON p.id = c.project_id
		WHERE c.uid = $1 AND c.status <> 'deleted' AND coalesce(c.extra_metadata->>'source', '') NOT IN ('agent_call', 'agent_evaluation')
		ORDER BY c.updated_at DESC, c.id DESC LIMIT $2`, uid, limit)
	if err != nil {
		return nil, fmt.Errorf("list history candidates: %w", err)
	}
	defer rows.Close()
	out := []HistoryCandidate{}
	for rows.Next() {
		var h HistoryCandidate
		if err := rows.Scan(&h.ThreadID, &h.Title, &h.AgentID, &h.ProjectID, &h.ProjectName, &h.WorkdirPath, &h.UpdatedAt); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, rows.Err()
}
