package intake

import (
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/pgtext"
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

// checkText reports why s cannot be stored as text (a NUL, invalid UTF-8)
// as a 400 with code; what names the input in the message.
func checkText(code, what, s string) error {
	if err := pgtext.Check(s); err != nil {
		return failure.Invalid(code, "%s %v", what, err)
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
// them (pgtext.CheckJSON): encoding/json would silently replace raw invalid
// UTF-8 and keep \u0000 and lone surrogates in a json.RawMessage headed for
// a jsonb column. data is valid JSON.
func checkJSONText(data []byte) error {
	if err := pgtext.CheckJSON(data); err != nil {
		return failure.Invalid("invalid_json", "request body %v", err)
	}
	return nil
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
