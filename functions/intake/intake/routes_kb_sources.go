package intake

import (
	"crypto/subtle"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/blob/notify"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// A KB's bucket bindings (sources), and the webhook that receives the
// buckets' notifications.

func (s *Server) listSources(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	list, err := s.d.KBs.Sources(r.Context(), subject(p), r.PathValue("kb_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"sources": list})
	return nil
}

func (s *Server) addSource(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in struct {
		Provider string `json:"provider"`
		Bucket   string `json:"bucket"`
		Prefix   string `json:"prefix"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	src, err := s.d.KBs.AddSource(r.Context(), subject(p), r.PathValue("kb_id"), in.Provider, in.Bucket, in.Prefix)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, src)
	return nil
}

func (s *Server) removeSource(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	id, err := strconv.ParseInt(r.PathValue("source_id"), 10, 64)
	if err != nil {
		return failure.NotFound("source_not_found", "source not found")
	}
	if err := s.d.KBs.RemoveSource(r.Context(), subject(p), r.PathValue("kb_id"), id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": true})
	return nil
}

// bucketNotification receives bucket notifications — S3 event records
// (directly, or wrapped by SNS/SQS), EventBridge S3 events, MinIO webhooks,
// Cloud Storage object events — authenticated with the notification token,
// and turns each object change into io.yuxi.bucket.object.changed.v1 for
// doc-parse. Repeated deliveries of one notification are one event (doc-parse
// also ignores a change of the version it already holds).
func (s *Server) bucketNotification(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	if s.d.NotifyToken == "" {
		return failure.NotFound("route_not_found", "bucket notifications are not enabled (set YUXI_NOTIFY_TOKEN)")
	}
	token := r.Header.Get("X-Yuxi-Notify-Token")
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		token = v
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(s.d.NotifyToken)) != 1 {
		return failure.Unauthorized("invalid_notify_token", "missing or wrong notification token")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4<<20))
	if err != nil {
		return failure.New(failure.KindTooLarge, "payload_too_large", "notifications are limited to 4 MiB")
	}
	changes, err := notify.Decode(body)
	if err != nil {
		return failure.Invalid("invalid_notification", "%v", err)
	}
	if err := s.kb.RecordBucketChanges(r.Context(), changes); err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"accepted": len(changes)})
	return nil
}

// verifySource checks the source's verification object in its bucket; from
// then on the bucket's notifications reach the KB (kb.Library.VerifySource).
func (s *Server) verifySource(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	id, err := strconv.ParseInt(r.PathValue("source_id"), 10, 64)
	if err != nil {
		return failure.NotFound("source_not_found", "source not found")
	}
	src, err := s.kb.VerifySource(r.Context(), subject(p), r.PathValue("kb_id"), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, src)
	return nil
}
