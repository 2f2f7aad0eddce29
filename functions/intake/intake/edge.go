package intake

import (
	"net/http"
	"net/url"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Input checks made once, at the edge, before any handler runs, so that no
// input reaches PostgreSQL (which refuses NUL in text and \u0000 or a lone
// surrogate in jsonb) or the object store in a shape that would fail there
// as a 500. The fuzz targets in edge_fuzz_test.go hold these decoders to it.

// cleanPath is the path ServeMux would redirect to.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if strings.HasSuffix(p, "/") && np != "/" {
		np += "/"
	}
	return np
}

// refuseUncleanPath answers 400 to a request other than GET or HEAD whose
// path is not clean ("..", ".", "//", also when percent-encoded): ServeMux
// would answer it with a redirect to the cleaned path, and a client that
// follows redirects would replay the method there (DELETE …/documents/%2e%2e
// would delete the knowledge base itself).
func refuseUncleanPath(r *http.Request) error {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil
	}
	if cleanPath(r.URL.Path) != r.URL.Path {
		return failure.Invalid("unclean_path", "the path %q is not in canonical form (it has '.', '..' or '//' segments)", r.URL.Path)
	}
	return nil
}

// checkText reports the first reason s cannot be stored as text: a NUL or
// invalid UTF-8. what names the input in the message.
func checkText(code, what, s string) error {
	if !utf8.ValidString(s) {
		return failure.Invalid(code, "%s is not valid UTF-8", what)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return failure.Invalid(code, "%s contains a NUL character", what)
	}
	return nil
}

// checkPathParams checks the route's path wildcards (every {name} of
// pattern) as the handler will read them with r.PathValue.
func checkPathParams(r *http.Request, pattern string) error {
	for _, name := range pathParamNames(pattern) {
		if err := checkText("invalid_path_param", "path parameter "+name, r.PathValue(name)); err != nil {
			return err
		}
	}
	return nil
}

// pathParamNames lists the wildcard names of a ServeMux path pattern.
func pathParamNames(pattern string) []string {
	var out []string
	for rest := pattern; ; {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			return out
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return out
		}
		name := strings.TrimSuffix(rest[i+1:i+j], "...")
		if name != "$" && name != "" {
			out = append(out, name)
		}
		rest = rest[i+j+1:]
	}
}

// checkQuery checks every query parameter's name and values. A query
// string that does not parse is refused too (handlers would otherwise see
// the parameters before the bad one only).
func checkQuery(r *http.Request) error {
	if r.URL.RawQuery == "" {
		return nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return failure.Invalid("invalid_query", "the query string does not parse: %v", err)
	}
	for k, vs := range q {
		if err := checkText("invalid_query", "a query parameter name", k); err != nil {
			return err
		}
		for _, v := range vs {
			if err := checkText("invalid_query", "query parameter "+k, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkJSONText checks a JSON document's strings as PostgreSQL will store
// them: no raw invalid UTF-8 (encoding/json would silently replace it), no
// \u0000 escape (text and jsonb refuse NUL) and no escaped surrogate that is
// not part of a pair (jsonb refuses it; encoding/json would turn it into
// U+FFFD in a struct but a json.RawMessage keeps it). data is valid JSON.
func checkJSONText(data []byte) error {
	if !utf8.Valid(data) {
		return failure.Invalid("invalid_json", "request body is not valid UTF-8")
	}
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		i++ // data is valid JSON: an escape always has its next byte
		if i >= len(data) || data[i] != 'u' {
			continue
		}
		r, ok := hex4(data, i+1)
		if !ok {
			continue
		}
		switch {
		case r == 0:
			return failure.Invalid("invalid_json", `request body contains a NUL character (\u0000)`)
		case r >= 0xD800 && r <= 0xDBFF: // high surrogate: a low one must follow
			lo, ok := uint16(0), false
			if i+6 < len(data) && data[i+5] == '\\' && data[i+6] == 'u' {
				lo, ok = hex4(data, i+7)
			}
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return failure.Invalid("invalid_json", `request body contains an unpaired surrogate (\u%04x)`, r)
			}
			i += 10
		case r >= 0xDC00 && r <= 0xDFFF:
			return failure.Invalid("invalid_json", `request body contains an unpaired surrogate (\u%04x)`, r)
		default:
			i += 4
		}
	}
	return nil
}

func hex4(b []byte, at int) (uint16, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var v uint16
	for _, c := range b[at : at+4] {
		v <<= 4
		switch {
		case c >= '0' && c <= '9':
			v |= uint16(c - '0')
		case c >= 'a' && c <= 'f':
			v |= uint16(c-'a') + 10
		case c >= 'A' && c <= 'F':
			v |= uint16(c-'A') + 10
		default:
			return 0, false
		}
	}
	return v, true
}

// maxFileNameBytes bounds an uploaded file's name (a file name on most file
// systems, and an object key segment).
const maxFileNameBytes = 255

// checkFileName checks a multipart file name.
func checkFileName(name string) error {
	if err := checkText("invalid_file_name", "the file name", name); err != nil {
		return err
	}
	if len(name) > maxFileNameBytes {
		return failure.Invalid("invalid_file_name", "the file name is %d bytes, more than %d", len(name), maxFileNameBytes)
	}
	base := name
	if i := strings.LastIndexAny(base, `/\`); i >= 0 {
		base = base[i+1:]
	}
	if base == "" || base == "." || base == ".." {
		return failure.Invalid("invalid_file_name", "the file name %q names no file", name)
	}
	return nil
}
