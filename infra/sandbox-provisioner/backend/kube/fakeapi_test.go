package kube_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// fakeAPI is a Kubernetes API server at the HTTP level, for the three
// resources the backend uses: it checks the bearer token, stores what is
// POSTed (409 on a second create), answers GET (one object, or a list by
// label selector) and DELETE (404 when missing), and makes a Pod Ready
// after readyAfter reads (never, when readyAfter < 0).
type fakeAPI struct {
	t          *testing.T
	token      string
	namespace  string
	readyAfter int

	mu    sync.Mutex
	objs  map[string]map[string]any // collection path + "/" + name
	reads map[string]int
	log   []string // "POST <collection>" / "DELETE <item>" in order
}

func newFakeAPI(t *testing.T, token, ns string) *fakeAPI {
	return &fakeAPI{t: t, token: token, namespace: ns, objs: map[string]map[string]any{}, reads: map[string]int{}}
}

var collections = map[string][2]string{ // suffix -> apiVersion, kind
	"pods":            {"v1", "Pod"},
	"services":        {"v1", "Service"},
	"networkpolicies": {"networking.k8s.io/v1", "NetworkPolicy"},
}

func status(w http.ResponseWriter, code int, reason string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code})
}

// split returns the collection path, its resource, and the item name ("" for the collection).
func (f *fakeAPI) split(p string) (coll, resource, name string, ok bool) {
	for _, prefix := range []string{"/api/v1/namespaces/" + f.namespace + "/", "/apis/networking.k8s.io/v1/namespaces/" + f.namespace + "/"} {
		if rest, found := strings.CutPrefix(p, prefix); found {
			parts := strings.Split(rest, "/")
			if len(parts) > 2 {
				return "", "", "", false
			}
			gv := collections[parts[0]]
			if gv[0] == "" || (gv[0] == "v1") != strings.HasPrefix(prefix, "/api/v1/") {
				return "", "", "", false
			}
			if len(parts) == 2 {
				name = parts[1]
			}
			return prefix + parts[0], parts[0], name, true
		}
	}
	return "", "", "", false
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+f.token {
		status(w, http.StatusUnauthorized, "Unauthorized")
		return
	}
	coll, resource, name, ok := f.split(r.URL.Path)
	if !ok {
		status(w, http.StatusNotFound, "NotFound")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && name == "":
		var obj map[string]any
		if err := json.NewDecoder(r.Body).Decode(&obj); err != nil {
			status(w, http.StatusBadRequest, "BadRequest")
			return
		}
		gv := collections[resource]
		meta, _ := obj["metadata"].(map[string]any)
		n, _ := meta["name"].(string)
		if obj["apiVersion"] != gv[0] || obj["kind"] != gv[1] || n == "" || meta["namespace"] != f.namespace {
			f.t.Errorf("bad %s object: %v", resource, obj)
			status(w, http.StatusBadRequest, "BadRequest")
			return
		}
		if _, exists := f.objs[coll+"/"+n]; exists {
			status(w, http.StatusConflict, "AlreadyExists")
			return
		}
		if resource == "pods" {
			obj["status"] = map[string]any{"phase": "Pending"}
		}
		f.objs[coll+"/"+n] = obj
		f.log = append(f.log, "POST "+resource)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(obj)
	case r.Method == http.MethodGet && name != "":
		obj, exists := f.objs[coll+"/"+name]
		if !exists {
			status(w, http.StatusNotFound, "NotFound")
			return
		}
		if resource == "pods" {
			f.reads[name]++
			if f.readyAfter >= 0 && f.reads[name] > f.readyAfter {
				obj["status"] = map[string]any{"phase": "Running", "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
			}
		}
		_ = json.NewEncoder(w).Encode(obj)
	case r.Method == http.MethodGet:
		sel := map[string]string{}
		for _, kv := range strings.Split(r.URL.Query().Get("labelSelector"), ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				sel[k] = v
			}
		}
		items := []any{}
		for key, obj := range f.objs {
			if !strings.HasPrefix(key, coll+"/") {
				continue
			}
			labels, _ := obj["metadata"].(map[string]any)["labels"].(map[string]any)
			match := true
			for k, v := range sel {
				if labels[k] != v {
					match = false
				}
			}
			if match {
				items = append(items, obj)
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": collections[resource][1] + "List", "items": items})
	case r.Method == http.MethodDelete && name != "":
		if _, exists := f.objs[coll+"/"+name]; !exists {
			status(w, http.StatusNotFound, "NotFound")
			return
		}
		delete(f.objs, coll+"/"+name)
		delete(f.reads, name)
		f.log = append(f.log, "DELETE "+resource)
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "status": "Success"})
	default:
		status(w, http.StatusMethodNotAllowed, "MethodNotAllowed")
	}
}

// get returns a stored object (nil when missing).
func (f *fakeAPI) get(resource, name string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	for key, obj := range f.objs {
		if strings.HasSuffix(key, "/"+resource+"/"+name) {
			b, _ := json.Marshal(obj) // a copy
			var c map[string]any
			_ = json.Unmarshal(b, &c)
			return c
		}
	}
	return nil
}

func (f *fakeAPI) history() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

// at walks a decoded JSON object: at(obj, "spec", "containers", 0, "name").
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			s, _ := v.([]any)
			if k >= len(s) {
				return nil
			}
			v = s[k]
		}
	}
	return v
}
