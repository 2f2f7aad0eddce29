package docparse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// maxJSONDepth bounds nesting (Python's json has a similar recursion limit).
const maxJSONDepth = 1000

// parseJSON pretty-prints the document with two-space indentation inside a
// ```json fence, as the original (json.dumps(indent=2, ensure_ascii=False)).
// Key order, number literals and non-ASCII text are kept as written.
func (p *Parser) parseJSON(name string, r io.ReaderAt, size int64) (Result, error) {
	b, err := readAll(r, size)
	if err != nil {
		return Result{}, err
	}
	text := decodeText(b)
	if strings.TrimSpace(text) == "" {
		return Result{}, coded(ErrEmpty, "%s contains only whitespace", name)
	}
	pretty, err := prettyJSON(text)
	if err != nil {
		return Result{}, coded(ErrCorrupt, "%s is not valid JSON: %v", name, err)
	}
	return Result{Markdown: "```json\n" + pretty + "\n```"}, nil
}

func prettyJSON(text string) (string, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var out strings.Builder
	if err := writeJSONValue(dec, &out, 0); err != nil {
		return "", err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("unexpected data after the top-level value (offset %d)", dec.InputOffset())
	}
	return out.String(), nil
}

func writeJSONValue(dec *json.Decoder, out *strings.Builder, depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("nesting deeper than %d levels", maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	switch v := tok.(type) {
	case json.Delim:
		closing := "]"
		if v == '{' {
			closing = "}"
		}
		out.WriteString(v.String())
		if !dec.More() {
			if _, err := dec.Token(); err != nil {
				return err
			}
			out.WriteString(closing)
			return nil
		}
		out.WriteString("\n")
		for first := true; dec.More(); first = false {
			if !first {
				out.WriteString(",\n")
			}
			writeIndent(out, depth+1)
			if v == '{' {
				key, err := dec.Token()
				if err != nil {
					return err
				}
				writeJSONString(out, key.(string))
				out.WriteString(": ")
			}
			if err := writeJSONValue(dec, out, depth+1); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return err
		}
		out.WriteString("\n")
		writeIndent(out, depth)
		out.WriteString(closing)
	case string:
		writeJSONString(out, v)
	case json.Number:
		out.WriteString(v.String())
	case bool:
		fmt.Fprint(out, v)
	case nil:
		out.WriteString("null")
	}
	return nil
}

func writeIndent(out *strings.Builder, depth int) {
	for range depth {
		out.WriteString("  ")
	}
}

// writeJSONString quotes s without escaping HTML characters or non-ASCII text.
func writeJSONString(out *strings.Builder, s string) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	out.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}
