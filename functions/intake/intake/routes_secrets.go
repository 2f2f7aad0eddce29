package intake

import (
	"context"
	"net/http"
	"sort"

	"github.com/yuxi-serverless/yuxi/shared/auth"
)

// secretOwner stores sealed secrets (shared/secret) and seals them again
// under the current key after a key rotation.
type secretOwner interface {
	ResealSecrets(ctx context.Context) (resealed int, failed []string, err error)
}

// secretRoutes: key rotation, beyond the original. An operator moves the old
// key to YUXI_ENCRYPTION_KEY_PREVIOUS, sets a new YUXI_ENCRYPTION_KEY,
// restarts, and calls this route; once it answers no failures the previous
// key can be dropped. Values that no configured key opens are named, never
// changed.
func (s *Server) secretRoutes() []Route {
	return []Route{
		{"POST", "/api/system/secrets/reseal", SuperAdmin, Superadmin, s.resealSecrets},
	}
}

type resealReport struct {
	Resealed int      `json:"resealed"`
	Failed   []string `json:"failed"`
}

// resealSecrets answers {resealed, failed, tables: {table: {resealed, failed}}}
// (503 encryption_key_missing when no key is configured).
func (s *Server) resealSecrets(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	owners := map[string]secretOwner{}
	if s.d.Providers != nil {
		owners["model_providers"] = s.d.Providers
	}
	if s.d.MCP != nil {
		owners["mcp_servers"] = s.d.MCP.Store()
	}
	if s.d.KBs != nil {
		owners["knowledge_bases"] = s.d.KBs
	}
	tables := map[string]resealReport{}
	total := resealReport{Failed: []string{}}
	for table, o := range owners {
		n, failed, err := o.ResealSecrets(r.Context())
		if err != nil {
			return err
		}
		if failed == nil {
			failed = []string{}
		}
		tables[table] = resealReport{Resealed: n, Failed: failed}
		total.Resealed += n
		for _, key := range failed {
			total.Failed = append(total.Failed, table+":"+key)
		}
	}
	sort.Strings(total.Failed)
	s.d.Log.Info("secrets resealed", "by", p.UID, "resealed", total.Resealed, "failed", len(total.Failed))
	writeJSON(w, http.StatusOK, map[string]any{"resealed": total.Resealed, "failed": total.Failed, "tables": tables})
	return nil
}
