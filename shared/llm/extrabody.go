package llm

import (
	"slices"
	"sort"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// ExtraBodyKeys returns the top-level request fields a model configuration
// may add through extra_body, as in the original product
// (ALLOWED_EXTRA_BODY_FIELDS). Only the top level is checked; the inside of
// objects like "thinking" or "reasoning" is the provider's business.
func ExtraBodyKeys() []string {
	return []string{"enable_thinking", "reasoning", "reasoning_effort", "thinking", "thinking_budget"}
}

// ValidateExtraBody rejects extra_body keys outside the whitelist, so a model
// configuration can never override model, messages, tools or stream.
func ValidateExtraBody(extra map[string]any) error {
	allowed := ExtraBodyKeys()
	var bad []string
	for k := range extra {
		if !slices.Contains(allowed, k) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return failure.Invalid("extra_body_not_allowed",
		"extra_body fields not allowed: %s (allowed: %s)", strings.Join(bad, ", "), strings.Join(allowed, ", "))
}
