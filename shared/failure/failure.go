// Package failure gives domain errors a kind and a stable, machine-readable
// code, so that the HTTP edge can map them to a status once, and clients can
// branch on the code (e.g. "run_interrupted") instead of parsing messages.
//
// Imported by: every domain package and the HTTP edge. May import: stdlib only.
package failure

import (
	"errors"
	"fmt"
)

// Kind classifies an error for the edge. The edge maps kinds to HTTP statuses.
type Kind int

const (
	KindInternal         Kind = iota // 500
	KindInvalid                      // 400: malformed input
	KindUnauthorized                 // 401
	KindForbidden                    // 403
	KindNotFound                     // 404
	KindConflict                     // 409
	KindTooLarge                     // 413
	KindUnprocessable                // 422: well-formed but not acceptable
	KindLocked                       // 423
	KindTooMany                      // 429
	KindUnavailable                  // 503
	KindUnsupportedMedia             // 415
	KindTimeout                      // 504: a bounded wait ended before the work did (the work goes on)
)

// Error is a coded domain error. Details, when set, are returned to the client
// next to the code (e.g. the active run id for "run_busy").
type Error struct {
	Kind    Kind
	Code    string
	Message string
	Details map[string]any
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Is makes errors.Is match on kind and code, so sentinels can be compared
// even when re-created with another message.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Kind == e.Kind
}

// New returns a coded error.
func New(kind Kind, code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

// With returns a copy of e carrying details.
func (e *Error) With(details map[string]any) *Error {
	c := *e
	c.Details = details
	return &c
}

// As extracts a coded error from err's chain.
func As(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

// Convenience constructors.
func Invalid(code, format string, args ...any) *Error { return New(KindInvalid, code, format, args...) }
func NotFound(code, format string, args ...any) *Error {
	return New(KindNotFound, code, format, args...)
}
func Conflict(code, format string, args ...any) *Error {
	return New(KindConflict, code, format, args...)
}
func Unprocessable(code, format string, args ...any) *Error {
	return New(KindUnprocessable, code, format, args...)
}
func Forbidden(code, format string, args ...any) *Error {
	return New(KindForbidden, code, format, args...)
}
func Unauthorized(code, format string, args ...any) *Error {
	return New(KindUnauthorized, code, format, args...)
}
