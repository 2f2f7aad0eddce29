package blob_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/blob/blobtest"
)

func TestValidateKeyAccepts(t *testing.T) {
	for _, k := range []string{
		"a",
		"kb/42/file_01H/report.pdf",
		"uploads/报告 (1).docx",
		".hidden/..dots/...",
		"a..b/c.d",
		"~/%2e%2e/x", // percent sequences are just characters
		strings.Repeat(strings.Repeat("k", 203)+"/", 4) + strings.Repeat("k", 208), // 1024 bytes
		strings.Repeat("s", 255) + "/" + strings.Repeat("t", 255),
	} {
		if err := blob.ValidateKey(k); err != nil {
			t.Errorf("ValidateKey(%.40q) = %v", k, err)
		}
	}
}

func TestValidateKeyRejects(t *testing.T) {
	for _, k := range blobtest.InvalidKeys {
		err := blob.ValidateKey(k)
		if !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("ValidateKey(%.40q) = %v, want ErrInvalidKey", k, err)
			continue
		}
		if len(err.Error()) > 200 {
			t.Errorf("error for a %d-byte key is %d bytes long; keys are truncated in messages", len(k), len(err.Error()))
		}
	}
}
