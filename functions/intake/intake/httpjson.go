package intake

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// errorBody is the machine-readable error every route returns:
// {"error":{"code":"run_interrupted","message":"…","details":{…}},"detail":"…"}.
// "detail" repeats the message for clients of the original API.
type errorBody struct {
	Error  errorPayload `json:"error"`
	Detail string       `json:"detail"`
}

type errorPayload struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

var kindStatus = map[failure.Kind]int{
	failure.KindInternal:         http.StatusInternalServerError,
	failure.KindInvalid:          http.StatusBadRequest,
	failure.KindUnauthorized:     http.StatusUnauthorized,
	failure.KindForbidden:        http.StatusForbidden,
	failure.KindNotFound:         http.StatusNotFound,
	failure.KindConflict:         http.StatusConflict,
	failure.KindTooLarge:         http.StatusRequestEntityTooLarge,
	failure.KindUnprocessable:    http.StatusUnprocessableEntity,
	failure.KindLocked:           http.StatusLocked,
	failure.KindTooMany:          http.StatusTooManyRequests,
	failure.KindUnavailable:      http.StatusServiceUnavailable,
	failure.KindUnsupportedMedia: http.StatusUnsupportedMediaType,
	failure.KindTimeout:          http.StatusGatewayTimeout,
}

// writeError maps err to a status once, here at the edge. Errors without a
// code are internal: logged in full, answered without internals.
func writeError(w http.ResponseWriter, log *slog.Logger, err error) {
	fe, ok := failure.As(err)
	if !ok {
		log.Error("internal error", "error", err)
		fe = failure.New(failure.KindInternal, "internal_error", "internal server error")
	}
	status := kindStatus[fe.Kind]
	if status == 0 {
		status = http.StatusInternalServerError
	}
	if fe.Kind == failure.KindUnauthorized {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
	if fe.Kind == failure.KindLocked || fe.Kind == failure.KindTooMany {
		if v, ok := fe.Details["retry_after_seconds"]; ok {
			if s, ok := v.(string); ok {
				w.Header().Set("Retry-After", s)
				if fe.Kind == failure.KindLocked {
					w.Header().Set("X-Lock-Remaining", s)
				}
			}
		}
	}
	writeJSON(w, status, errorBody{Error: errorPayload{Code: fe.Code, Message: fe.Message, Details: fe.Details}, Detail: fe.Message})
}

// writeSuccess answers the original's {"success": true, "data": …} shape
// (model providers, skills).
func writeSuccess(w http.ResponseWriter, data any) {
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": data})
}

// respond is writeSuccess of data unless err (a use case's two results).
func respond(w http.ResponseWriter, data any, err error) error {
	if err != nil {
		return err
	}
	writeSuccess(w, data)
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decodeJSON reads a JSON object body into v. Malformed JSON is 400
// invalid_json; a body over the limit is 413 payload_too_large; a body of the
// wrong shape is 422 invalid_request.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.Contains(strings.ToLower(ct), "json") {
		return failure.New(failure.KindUnprocessable, "unsupported_content_type", "expected application/json, got %q", ct)
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	data, err := io.ReadAll(body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return failure.New(failure.KindTooLarge, "payload_too_large", "request body exceeds %d bytes", limit)
		}
		return failure.Invalid("invalid_body", "cannot read request body: %v", err)
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return failure.Invalid("invalid_json", "request body is empty; expected a JSON object")
	}
	if !json.Valid(data) {
		return failure.Invalid("invalid_json", "request body is not valid JSON")
	}
	if err := checkJSONText(data); err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return failure.Unprocessable("invalid_request", "field %q has the wrong type: expected %s", typeErr.Field, typeErr.Type.String())
		}
		return failure.Unprocessable("invalid_request", "request body has the wrong shape: %v", err)
	}
	return nil
}

// parseForm reads an application/x-www-form-urlencoded body within limit.
func parseForm(w http.ResponseWriter, r *http.Request, limit int64) error {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	if err := r.ParseForm(); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return failure.New(failure.KindTooLarge, "payload_too_large", "request body exceeds %d bytes", limit)
		}
		return failure.Invalid("invalid_form", "cannot parse form body: %v", err)
	}
	for k, vs := range r.Form {
		if err := checkText("invalid_form", "form field name", k); err != nil {
			return err
		}
		for _, v := range vs {
			if err := checkText("invalid_form", "form field "+k, v); err != nil {
				return err
			}
		}
	}
	return nil
}
