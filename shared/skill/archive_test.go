package skill_test

import (
	"archive/zip"
	"bytes"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/skill"
)

type entry struct {
	name string
	data []byte
	mode fs.FileMode
	raw  bool // store uncompressed
}

func zipOf(t *testing.T, es ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range es {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		if e.raw {
			h.Method = zip.Store
		}
		if e.mode != 0 {
			h.SetMode(e.mode)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const md = "---\nname: demo-skill\ndescription: A demo.\n---\n# Demo\n"

func code(err error) string {
	if fe, ok := failure.As(err); ok {
		return fe.Code
	}
	return ""
}

func TestUnzipRefusesHostileArchivesWithClearCodes(t *testing.T) {
	t.Parallel()
	lim := skill.Limits{MaxEntries: 10, MaxDepth: 4, MaxTotal: 1 << 20, MaxFile: 512 << 10, MaxRatio: 50}
	ok := entry{name: "demo/SKILL.md", data: []byte(md)}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"zip-slip", zipOf(t, ok, entry{name: "demo/../../etc/passwd", data: []byte("x")}), skill.CodeArchiveUnsafe},
		{"absolute path", zipOf(t, ok, entry{name: "/etc/cron.d/x", data: []byte("x")}), skill.CodeArchiveUnsafe},
		{"backslash", zipOf(t, ok, entry{name: `demo\..\x`, data: []byte("x")}), skill.CodeArchiveUnsafe},
		{"symlink", zipOf(t, ok, entry{name: "demo/link", data: []byte("/etc/passwd"), mode: fs.ModeSymlink | 0o777}), skill.CodeArchiveSymlink},
		{"entry count", zipOf(t, append([]entry{ok}, manyEntries(10)...)...), skill.CodeArchiveEntries},
		{"depth", zipOf(t, ok, entry{name: "demo/a/b/c/d/e.txt", data: []byte("x")}), skill.CodeArchiveDepth},
		{"one file too large", zipOf(t, ok, entry{name: "demo/big.txt", data: bytes.Repeat([]byte{'a'}, 600<<10), raw: true}), skill.CodeArchiveTooLarge},
		{"total too large", zipOf(t, ok, entry{name: "demo/a.txt", data: randomish(400 << 10), raw: true},
			entry{name: "demo/b.txt", data: randomish(400 << 10), raw: true}, entry{name: "demo/c.txt", data: randomish(400 << 10), raw: true}), skill.CodeArchiveTooLarge},
		{"compression ratio (zip bomb)", zipOf(t, ok, entry{name: "demo/bomb.txt", data: bytes.Repeat([]byte{0}, 500<<10)}), skill.CodeArchiveRatio},
		{"not a zip", []byte("PK but not really"), skill.CodeArchiveInvalid},
	}
	for _, c := range cases {
		_, err := skill.Unzip(c.data, lim)
		if got := code(err); got != c.want {
			t.Errorf("%s: code %q (%v), want %q", c.name, got, err, c.want)
		}
	}
	// The archive over the compressed limit is refused before it is read.
	if _, err := skill.Unzip(bytes.Repeat([]byte{'x'}, 2048), skill.Limits{MaxArchive: 1024}); code(err) != skill.CodeArchiveTooLarge {
		t.Errorf("archive over the compressed limit: %v", err)
	}
	// A well-formed one unpacks, directories implied.
	fs, err := skill.Unzip(zipOf(t, entry{name: "demo/", mode: fs.ModeDir | 0o755}, ok, entry{name: "demo/scripts/run.py", data: []byte("print(1)\n")}), lim)
	if err != nil || len(fs) != 2 || fs[1].Path != "demo/scripts/run.py" {
		t.Fatalf("good archive: %v %+v", err, fs)
	}
}

func manyEntries(n int) []entry {
	var out []entry
	for i := range n {
		out = append(out, entry{name: "demo/f" + strings.Repeat("x", i) + ".txt", data: []byte("x")})
	}
	return out
}

// randomish is poorly compressible data.
func randomish(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func TestSkillMDFrontmatterAndSlugRules(t *testing.T) {
	t.Parallel()
	m, err := skill.ParseSkillMD([]byte("---\nname: Word / DOCX\nslug: word-docx\ndescription: Edit Word files.\ntool_dependencies: [query_kb, query_kb, ' ']\n---\nbody"))
	if err != nil || m.Slug != "word-docx" || m.Name != "Word / DOCX" || len(m.ToolDependencies) != 1 {
		t.Fatalf("%+v %v", m, err)
	}
	for _, bad := range []string{
		"no frontmatter",
		"---\nname: x\n", // unterminated
		"---\nname: Not A Slug\ndescription: d\n---\n",          // name used as slug must follow the rule
		"---\nname: ok\nslug: bad--slug\ndescription: d\n---\n", // double hyphen
		"---\nname: ok\nslug: Bad\ndescription: d\n---\n",
		"---\nname: ok\n---\n", // no description
		"---\n- a list\n---\n",
	} {
		if _, err := skill.ParseSkillMD([]byte(bad)); code(err) != "invalid_skill_md" {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if !skill.ValidSlug("a1-b2") || skill.ValidSlug("-a") || skill.ValidSlug("a-") || skill.ValidSlug(strings.Repeat("a", 129)) {
		t.Error("slug rule")
	}
	out := skill.RewriteSlug([]byte("---\nname: x\nslug: x\ndescription: d\n---\n"), "x-v2")
	if m, err := skill.ParseSkillMD(out); err != nil || m.Slug != "x-v2" {
		t.Errorf("rewrite: %s %v", out, err)
	}
}

func TestFindCycle(t *testing.T) {
	t.Parallel()
	if c := skill.FindCycle(map[string][]string{"a": {"b"}, "b": {"c"}, "c": nil}); c != nil {
		t.Errorf("acyclic: %v", c)
	}
	c := skill.FindCycle(map[string][]string{"a": {"b"}, "b": {"c"}, "c": {"a"}})
	if strings.Join(c, ">") != "a>b>c>a" {
		t.Errorf("cycle: %v", c)
	}
}

func TestBuiltinsShip(t *testing.T) {
	t.Parallel()
	got := map[string]skill.BuiltinSpec{}
	for _, b := range skill.Builtins() {
		got[b.Slug] = b
	}
	if kb := got["knowledge-base"]; len(kb.Tools) < 4 || kb.Tools[0] != "list_kbs" || !slices.Contains(kb.Tools, "download_kb_file") {
		t.Errorf("knowledge-base: %+v", kb.Tools)
	}
	if dr := got["deep-research"]; strings.Join(dr.Tools, ",") != "web_search,web_fetch" || strings.Join(dr.Skills, ",") != "html-preview" {
		t.Errorf("deep-research: %+v %+v", dr.Tools, dr.Skills)
	}
	if _, ok := got["html-preview"]; !ok || len(got) != 3 {
		t.Errorf("builtins: %v", got)
	}
}
