// Package userfiles is what users see of the files on the sandbox
// provisioner's volume: the viewer of a thread's files
// (/api/viewer/filesystem/*), a thread's artifacts (download, inline
// preview, save to the workspace), the user's workspace (/api/workspace/*),
// file mentions, and chat attachments (uploaded to a temporary object,
// parsed to Markdown, confirmed into the thread's uploads).
//
// Every file is read and written through the provisioner's authenticated
// file API (shared/sandbox), never a mounted volume, so the routes work
// unchanged on Lambda, Cloud Run and Knative; reads and listings are served
// from the volume without starting a sandbox. Every thread operation first
// loads the thread as the caller's (another user's thread is
// thread_not_found); the workspace is always the caller's own (the scope
// is built from the caller's uid, and paths are confined to it).
//
// Imported by: functions/intake, tests/bench. May import: shared/sandbox, shared/thread,
// shared/blob, shared/docparse, shared/failure and the standard library.
package userfiles

import (
	"context"
	"errors"
	"io"
	"path"
	"strings"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/docparse"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/shared/thread"
)

// Sandbox is the provisioner's file API as used here.
type Sandbox interface {
	ReadFile(ctx context.Context, s sandbox.Scope, path string, maxBytes int64) ([]byte, int64, bool, error)
	WriteFile(ctx context.Context, s sandbox.Scope, path string, data []byte, exclusive bool) (int64, error)
	DeleteFile(ctx context.Context, s sandbox.Scope, path string, recursive bool) error
	Mkdir(ctx context.Context, s sandbox.Scope, path string) error
	Stat(ctx context.Context, s sandbox.Scope, path string) (sandbox.Entry, error)
	List(ctx context.Context, s sandbox.Scope, path string, depth int) ([]sandbox.Entry, bool, error)
	Archive(ctx context.Context, s sandbox.Scope, path string, w io.Writer) error
}

// Threads loads a caller's thread and keeps its attachment list
// (shared/thread owns conversations).
type Threads interface {
	Get(ctx context.Context, uid, threadID string) (thread.Thread, error)
	AddAttachments(ctx context.Context, uid, threadID string, add []thread.Attachment) ([]thread.Attachment, error)
	Attachments(ctx context.Context, uid, threadID string) ([]thread.Attachment, error)
	RemoveAttachment(ctx context.Context, uid, threadID, fileID string) (thread.Attachment, error)
}

// Parser turns a document into Markdown (doc-parse's parser).
type Parser interface {
	Parse(ctx context.Context, filename string, r io.ReaderAt, size int64) (docparse.Result, error)
}

// Config are the service's collaborators and limits.
type Config struct {
	Sandbox Sandbox
	Threads Threads
	// Blob holds temporary attachments (nil: the attachment routes answer 503).
	Blob   blob.Store
	Parser Parser
	// MaxUploadBytes bounds one uploaded file (default 50 MiB).
	MaxUploadBytes int64
	// MaxPreviewBytes bounds a text preview (default 2 MiB; longer is cut).
	MaxPreviewBytes int64
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Service serves the file routes.
type Service struct{ cfg Config }

// New returns the service.
func New(cfg Config) *Service {
	if cfg.MaxUploadBytes <= 0 {
		cfg.MaxUploadBytes = 50 << 20
	}
	if cfg.MaxPreviewBytes <= 0 {
		cfg.MaxPreviewBytes = 2 << 20
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg}
}

// MaxUploadBytes is the largest file an upload accepts.
func (s *Service) MaxUploadBytes() int64 { return s.cfg.MaxUploadBytes }

// Virtual paths.
const (
	Root         = "/"
	Home         = "/home/gem"
	UserData     = sandbox.UserDataDir
	WorkspaceDir = sandbox.WorkspaceDir
	UploadsDir   = sandbox.UploadsDir
	OutputsDir   = sandbox.OutputsDir
	SkillsDir    = sandbox.SkillsDir
)

// Errors of this package (the provisioner's own codes are translated by fileErr).
var (
	ErrUnavailable  = failure.New(failure.KindUnavailable, "sandbox_unavailable", "no sandbox provisioner is configured")
	ErrPathRequired = failure.Unprocessable("path_required", "path is required")
)

// Entry is one file or directory as the viewer and workspace show it.
// Directories' paths end in "/", as the original.
type Entry struct {
	Path       string `json:"path"`
	Name       string `json:"name"`
	IsDir      bool   `json:"is_dir"`
	Size       int64  `json:"size"`
	ModifiedAt string `json:"modified_at"`
}

func entryOf(e sandbox.Entry, display string) Entry {
	out := Entry{Path: display, Name: e.Name, IsDir: e.IsDir, Size: e.Size}
	if !e.ModTime.IsZero() {
		out.ModifiedAt = e.ModTime.UTC().Format(time.RFC3339)
	}
	if out.IsDir && !strings.HasSuffix(out.Path, "/") {
		out.Path += "/"
		out.Size = 0
	}
	return out
}

// fileErr translates the provisioner's codes into this API's: a missing
// file is file_not_found (404), a path outside the caller's roots
// path_forbidden (403); the rest pass through.
func fileErr(err error, p string) error {
	if err == nil {
		return nil
	}
	fe, ok := failure.As(err)
	if !ok {
		return err
	}
	switch fe.Code {
	case "not_found":
		return failure.NotFound("file_not_found", "%s does not exist", p)
	case "path_not_allowed", "bad_scope":
		return failure.Forbidden("path_forbidden", "%s is outside your files", p)
	case "read_only":
		return failure.Forbidden("read_only_forbidden", "%s is read-only", p)
	case "is_directory":
		return failure.Invalid("is_directory", "%s is a directory", p)
	case "not_directory":
		return failure.Invalid("not_directory", "%s is not a directory", p)
	case "exists":
		return failure.Conflict("file_exists", "%s exists", p)
	}
	return err
}

func isNotFound(err error) bool {
	fe, ok := failure.As(err)
	return ok && (fe.Code == "not_found" || fe.Code == "file_not_found")
}

// cleanVirtual normalizes a caller's virtual path: absolute, no `..`
// segment (refused outright, as the provisioner does), no trailing slash.
func cleanVirtual(p string) (string, error) {
	p = strings.TrimSpace(p)
	if p == "" {
		p = Root
	}
	if strings.ContainsRune(p, 0) || len(p) > 4096 {
		return "", failure.Forbidden("path_forbidden", "invalid path")
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", failure.Forbidden("path_forbidden", "%q has a .. segment", p)
		}
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return path.Clean(p), nil
}

func within(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// validName is a single file or directory name a caller gives.
func validName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") || len(name) > 255 {
		return failure.Unprocessable("invalid_name", "%q is not a valid file name", name)
	}
	return nil
}

func (s *Service) ready() error {
	if s == nil || s.cfg.Sandbox == nil {
		return ErrUnavailable
	}
	return nil
}

// threadScope checks that threadID is uid's thread and returns its scope.
func (s *Service) threadScope(ctx context.Context, uid, threadID string) (sandbox.Scope, error) {
	if err := s.ready(); err != nil {
		return sandbox.Scope{}, err
	}
	if strings.TrimSpace(threadID) == "" {
		return sandbox.Scope{}, failure.Unprocessable("thread_id_required", "thread_id is required")
	}
	if _, err := s.cfg.Threads.Get(ctx, uid, threadID); err != nil {
		return sandbox.Scope{}, err
	}
	return sandbox.ThreadScope(uid, threadID), nil
}

// workspaceScope is uid's workspace alone.
func (s *Service) workspaceScope(uid string) (sandbox.Scope, error) {
	if err := s.ready(); err != nil {
		return sandbox.Scope{}, err
	}
	return sandbox.Scope{UID: uid}, nil
}

var errStop = errors.New("stop")

// CheckThread answers whether threadID is uid's thread (thread_not_found
// otherwise), for routes that check before reading a body.
func (s *Service) CheckThread(ctx context.Context, uid, threadID string) error {
	_, err := s.threadScope(ctx, uid, threadID)
	return err
}
