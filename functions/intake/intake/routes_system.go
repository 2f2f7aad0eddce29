package intake

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/docparse"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/sysconfig"
)

// readyTimeout bounds each dependency check of /api/system/ready.
const readyTimeout = 2 * time.Second

// ready answers 200 when every dependency answers, else 503 with each
// dependency's state (unlike health, which is liveness only).
func (s *Server) ready(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	checks := map[string]string{}
	ok := true
	for name, check := range s.d.Ready {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		err := check(ctx)
		cancel()
		if err != nil {
			ok = false
			checks[name] = "unavailable"
			s.log.Warn("readiness check failed", "dependency", name, "err", err)
		} else {
			checks[name] = "ok"
		}
	}
	status, code := "ready", http.StatusOK
	if !ok {
		status, code = "not_ready", http.StatusServiceUnavailable
	}
	writeJSON(w, code, map[string]any{"status": status, "checks": checks})
	return nil
}

// discovery is the public capability list the web app reads before login.
func (s *Server) discovery(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	writeJSON(w, http.StatusOK, map[string]any{
		"api_version": "v1",
		"features": map[string]bool{
			"knowledge":     s.kb != nil,
			"evaluation":    s.d.Evaluation != nil,
			"oidc":          s.d.OIDC != nil && s.d.OIDC.PublicConfig().Enabled,
			"system_config": s.d.SysConfig != nil,
			"ocr":           s.d.OCREngine != "",
		},
	})
	return nil
}

var errNoSysConfig = failure.New(failure.KindUnavailable, "system_config_unavailable", "system settings are not configured in this deployment")

func (s *Server) configSnapshot(ctx context.Context) (sysconfig.Snapshot, error) {
	if s.d.SysConfig == nil {
		return sysconfig.Snapshot{}, errNoSysConfig
	}
	return s.d.SysConfig.Get(ctx)
}

// getConfig returns every setting (defaults filled in).
func (s *Server) getConfig(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	snap, err := s.configSnapshot(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, snap.Values)
	return nil
}

func (s *Server) setConfig(w http.ResponseWriter, r *http.Request, p auth.Principal, items map[string]json.RawMessage) error {
	if s.d.SysConfig == nil {
		return errNoSysConfig
	}
	snap, err := s.d.SysConfig.Set(r.Context(), p.UserID, items)
	if err != nil {
		return err
	}
	s.log.Info("system config updated", "user_id", p.UserID, "keys", len(items))
	writeJSON(w, http.StatusOK, snap.Values)
	return nil
}

// updateConfigSingle: POST /api/system/config {"key": …, "value": …}.
func (s *Server) updateConfigSingle(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in struct {
		Key   string          `json:"key"`
		Value json.RawMessage `json:"value"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	if in.Key == "" || in.Value == nil {
		return failure.Invalid("invalid_config", "key and value are required")
	}
	return s.setConfig(w, r, p, map[string]json.RawMessage{in.Key: in.Value})
}

// updateConfigBatch: POST /api/system/config/update {key: value, …}, all or none.
func (s *Server) updateConfigBatch(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var items map[string]json.RawMessage
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &items); err != nil {
		return err
	}
	return s.setConfig(w, r, p, items)
}

// configOptions returns the settings form (schema) with the current values.
func (s *Server) configOptions(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	snap, err := s.configSnapshot(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"options": sysconfig.Schema, "values": snap.Values, "version": snap.Version})
	return nil
}

// putConfigOption: PUT /api/system/config/options/{key}, the body is the JSON value.
func (s *Server) putConfigOption(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var value json.RawMessage
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &value); err != nil {
		return err
	}
	return s.setConfig(w, r, p, map[string]json.RawMessage{r.PathValue("key"): value})
}

// info is the public branding and instance information.
func (s *Server) info(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	info := s.d.Info
	if info == nil {
		info = map[string]any{"organization": map[string]any{"name": "Yuxi"}, "branding": map[string]any{"name": "Yuxi", "title": "Yuxi"}}
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

// reloadInfo rereads the system settings from Postgres in this process now
// (other processes follow within the version-check bound).
func (s *Server) reloadInfo(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	if s.d.SysConfig == nil {
		return errNoSysConfig
	}
	snap, err := s.d.SysConfig.Reload(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"message": "reloaded", "version": snap.Version})
	return nil
}

// ocrOptions lists the OCR methods this deployment can run and the default.
func (s *Server) ocrOptions(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	methods := []map[string]any{{"value": "disable", "label": "不启用 OCR", "available": true}}
	if s.d.OCREngine != "" {
		methods = append(methods, map[string]any{"value": s.d.OCREngine, "label": s.d.OCREngine, "available": true})
	}
	def := "disable"
	if s.d.SysConfig != nil {
		if snap, err := s.d.SysConfig.Get(r.Context()); err == nil && snap.String("default_ocr_method") != "" {
			def = snap.String("default_ocr_method")
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"methods": methods, "default": def})
	return nil
}

// ocrHealth checks every OCR method with this deployment's configuration
// (the original's check_all_ocr_health): the configured engine is probed.
func (s *Server) ocrHealth(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	writeJSON(w, http.StatusOK, map[string]any{"health": docparse.OCRHealth(r.Context(), nil, s.d.OCREngine, s.d.OCRBaseURL)})
	return nil
}

// systemLogs answers this process's last log lines (at most 1000; ?levels=
// INFO,ERROR filters), as the original's /api/system/logs read the API
// process's log file. A function instance has no shared log file: each
// intake instance answers with its own lines, kept in memory.
func (s *Server) systemLogs(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	var levels map[string]bool
	if v := r.URL.Query().Get("levels"); v != "" {
		levels = map[string]bool{}
		for _, l := range strings.Split(v, ",") {
			if l = strings.ToUpper(strings.TrimSpace(l)); l != "" {
				if l == "WARNING" {
					l = "WARN" // the original's name for slog's WARN
				}
				levels[l] = true
			}
		}
	}
	var lines []string
	if s.d.Logs != nil {
		lines = s.d.Logs.Lines(levels)
	}
	log := strings.Join(lines, "\n")
	if log != "" {
		log += "\n"
	}
	writeJSON(w, http.StatusOK, map[string]any{"log": log, "message": "success", "log_file": "memory", "scope": "api"})
	return nil
}
