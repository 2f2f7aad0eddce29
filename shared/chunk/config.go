package chunk

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Token limits accepted for chunk_token_num.
const (
	MinChunkTokenNum     = 16
	MaxChunkTokenNum     = 8192
	DefaultChunkTokenNum = 512
)

// Config is a chunk_parser_config: the same keys for every preset.
type Config struct {
	// ChunkTokenNum is the target chunk size in CountTokens tokens.
	ChunkTokenNum int `json:"chunk_token_num"`
	// Delimiter splits sections; escapes are already resolved ("\n" is a
	// newline). Backtick-quoted parts (e.g. "`---`") are strict custom
	// delimiters for general and separator.
	Delimiter string `json:"delimiter"`
	// OverlappedPercent (0..99) is the share of the previous chunk repeated
	// at the start of the next one (general, book and laws merges; separator
	// windows).
	OverlappedPercent int `json:"overlapped_percent"`
	// Language is the qa preset's output language: "Chinese" (default, also
	// when empty) or "English".
	Language string `json:"language,omitempty"`
	// EmbedModelID is the semantic preset's embedding model, recorded so the
	// caller can choose the Embedder; this package does not use it. Accepted
	// because the original stores it in chunk_parser_config.
	EmbedModelID string `json:"embed_model_id,omitempty"`
}

// DefaultConfig is the original's default: 512 tokens, "\n", no overlap.
func DefaultConfig() Config {
	return Config{ChunkTokenNum: DefaultChunkTokenNum, Delimiter: "\n", OverlappedPercent: 0}
}

// ParseConfig reads a chunk_parser_config strictly: unknown keys, wrong JSON
// types, trailing data and chunk_token_num outside 16..8192 are
// failure.Unprocessable("invalid_chunk_config"). Missing or null keys take
// the defaults; an empty delimiter is "\n"; overlapped_percent is clamped to
// 0..99 (as the original does); \n \r \t and \\ escapes in delimiter are
// resolved. Empty input or null gives DefaultConfig(). The result marshals
// back to JSON that ParseConfig reads to the same Config (unless the
// delimiter holds a literal backslash).
func ParseConfig(raw json.RawMessage) (Config, error) {
	cfg := DefaultConfig()
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return cfg, nil
	}
	if trimmed[0] != '{' {
		return cfg, invalidConfig("chunk_parser_config must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return DefaultConfig(), invalidConfig("%s must be a %s, not a JSON %s", te.Field, te.Type, te.Value)
		}
		return DefaultConfig(), invalidConfig("chunk_parser_config: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return DefaultConfig(), invalidConfig("chunk_parser_config has trailing data")
	}
	if cfg.ChunkTokenNum < MinChunkTokenNum || cfg.ChunkTokenNum > MaxChunkTokenNum {
		return DefaultConfig(), tokenRangeError(cfg.ChunkTokenNum)
	}
	cfg.Delimiter = unescapeDelimiter(cfg.Delimiter)
	return cfg.normalized()
}

// normalized fills defaults for zero fields (a Config built in code), clamps
// the overlap and validates the rest.
func (c Config) normalized() (Config, error) {
	if c.ChunkTokenNum == 0 {
		c.ChunkTokenNum = DefaultChunkTokenNum
	}
	if c.ChunkTokenNum < MinChunkTokenNum || c.ChunkTokenNum > MaxChunkTokenNum {
		return DefaultConfig(), tokenRangeError(c.ChunkTokenNum)
	}
	if c.Delimiter == "" {
		c.Delimiter = "\n"
	}
	c.OverlappedPercent = max(0, min(c.OverlappedPercent, 99))
	switch strings.ToLower(strings.TrimSpace(c.Language)) {
	case "":
		c.Language = ""
	case "chinese":
		c.Language = "Chinese"
	case "english":
		c.Language = "English"
	default:
		return DefaultConfig(), invalidConfig("language must be \"Chinese\" or \"English\", got %q", c.Language)
	}
	return c, nil
}

func tokenRangeError(n int) error {
	return invalidConfig("chunk_token_num must be between %d and %d, got %d", MinChunkTokenNum, MaxChunkTokenNum, n)
}

func invalidConfig(format string, args ...any) error {
	return failure.Unprocessable("invalid_chunk_config", format, args...)
}

// unescapeDelimiter resolves \n \r \t and \\ typed into a form field; other
// backslash sequences are kept as they are.
func unescapeDelimiter(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case '\\':
			b.WriteByte('\\')
		default:
			b.WriteByte('\\')
			b.WriteByte(s[i+1])
		}
		i++
	}
	return b.String()
}
