package kb_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/secret"
	"github.com/yuxi-serverless/yuxi/shared/secret/secrettest"
)

// After a key rotation ResealSecrets seals connector tokens again under the
// new key, so the old key can be dropped; document KBs (no token) are left alone.
func TestResealConnectorTokensAfterKeyRotation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ring := func(current string, previous ...string) *secret.Keyring {
		return secrettest.Ring(t, current, previous...)
	}
	oldKey, newKey := strings.Repeat("o", 40), strings.Repeat("n", 40)
	e.store.UseSecrets(ring(oldKey))
	params, _ := json.Marshal(map[string]any{"api_base_url": "https://dify.example.test/v1", "api_key": "dify-secret-key", "dataset_id": "ds-1"})
	conn, err := e.store.Create(e.ctx, owner, kb.CreateInput{Name: "Dify docs", KBType: "dify", AdditionalParams: params})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Create(e.ctx, owner, kb.CreateInput{Name: "Manuals"}); err != nil {
		t.Fatal(err)
	}
	e.store.UseSecrets(ring(newKey, oldKey))
	n, failed, err := e.store.ResealSecrets(e.ctx)
	if err != nil || n != 1 || len(failed) != 0 {
		t.Fatalf("reseal: %d %v %v, want the connector's token", n, failed, err)
	}
	var sealed string
	if err := e.pool.QueryRow(e.ctx, `SELECT connector_secret FROM knowledge_bases WHERE kb_id = $1`, conn.KBID).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if plain, err := ring(newKey).Open(sealed, "knowledge_base:"+conn.KBID+":connector_secret"); err != nil || plain != "dify-secret-key" {
		t.Fatalf("the token under the new key alone: %q %v", plain, err)
	}
	if n, _, err := e.store.ResealSecrets(e.ctx); err != nil || n != 0 {
		t.Fatalf("second pass: %d %v", n, err)
	}
}
