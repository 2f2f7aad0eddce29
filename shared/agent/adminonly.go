package agent

import (
	"encoding/json"
	"reflect"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// checkAdminOnly refuses a change of an admin-only context setting
// (max_execution_steps, model_retry_times: the items Items marks AdminOnly)
// by a subject below admin: before is the stored config_json (nil on create:
// the defaults), after the one being written. Leaving the value as it was
// (or at its default) is allowed, so a user's client that echoes the whole
// config back still saves.
func checkAdminOnly(sub access.Subject, before, after json.RawMessage) error {
	if sub.Role == "admin" || sub.Role == "superadmin" || len(after) == 0 {
		return nil
	}
	old, cur := contextValues(before), contextValues(after)
	for _, it := range Items(nil, true) {
		if !it.AdminOnly {
			continue
		}
		v, ok := cur[it.Key]
		if !ok || v == nil {
			continue
		}
		prev, had := old[it.Key]
		if !had || prev == nil {
			prev = toJSONValue(it.Default)
		}
		if !reflect.DeepEqual(v, prev) {
			return failure.Forbidden("admin_only_setting", "only an admin may change %s", it.Key)
		}
	}
	return nil
}

func contextValues(cfg json.RawMessage) map[string]any {
	var doc struct {
		Context map[string]any `json:"context"`
	}
	if len(cfg) > 0 {
		_ = json.Unmarshal(cfg, &doc)
	}
	return doc.Context
}

func toJSONValue(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}
