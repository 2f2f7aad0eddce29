package chunk

import (
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// This file ports the heading machinery of the original's nlp.py (itself
// from RAGFlow): bullet/heading pattern groups, the table-of-contents
// remover, hierarchical_merge (book) and tree_merge (laws).

// bulletGroup is one family of heading patterns; match returns the level
// (0 = outermost) a line starts with, or -1.
type bulletGroup struct {
	levels int
	match  func(line string) int
}

const (
	groupChineseLaw = 0
	groupNumeric    = 1
	groupMarkdown   = 4
)

// Read-only compiled patterns.
var (
	lawLevelRes = []*regexp.Regexp{
		regexp.MustCompile(`^第[零一二三四五六七八九十百0-9]+(分?编|部分)`),
		regexp.MustCompile(`^第[零一二三四五六七八九十百0-9]+章`),
		regexp.MustCompile(`^第[零一二三四五六七八九十百0-9]+节`),
		regexp.MustCompile(`^第[零一二三四五六七八九十百0-9]+条`),
		regexp.MustCompile(`^[(（][零一二三四五六七八九十百]+[)）]`),
	}
	numericChapterRes = []*regexp.Regexp{
		regexp.MustCompile(`^第[0-9]+章`),
		regexp.MustCompile(`^第[0-9]+节`),
	}
	numericOutlineRe = regexp.MustCompile(`^([0-9]{1,2})((?:\.[0-9]{1,2}){0,3})`)
	chineseLevelRes  = []*regexp.Regexp{
		regexp.MustCompile(`^第[零一二三四五六七八九十百0-9]+章`),
		regexp.MustCompile(`^第[零一二三四五六七八九十百0-9]+节`),
		regexp.MustCompile(`^[零一二三四五六七八九十百]+[ 、]`),
		regexp.MustCompile(`^[(（][零一二三四五六七八九十百]+[)）]`),
		regexp.MustCompile(`^[(（][0-9]{0,2}[)）]`),
	}
	englishLevelRes = []*regexp.Regexp{
		regexp.MustCompile(`^PART (ONE|TWO|THREE|FOUR|FIVE|SIX|SEVEN|EIGHT|NINE|TEN)`),
		regexp.MustCompile(`^Chapter (I+V?|VI*|XI|IX|X)`),
		regexp.MustCompile(`^Section [0-9]+`),
		regexp.MustCompile(`^Article [0-9]+`),
	}
	mdHeadingRe    = regexp.MustCompile(`^#{1,6}\s+\S`)
	htmlTableTagRe = regexp.MustCompile(`(?i)</?(table|tr|td|th|caption|tbody|thead)[^>]*>`)
	headingPunctRe = regexp.MustCompile(`[，。；！？!?:：]`)
	midBulletRe    = regexp.MustCompile(`([一二三四五六七八九十百]+、|[(（][一二三四五六七八九十百]+[)）]|[0-9]{1,2}[.、])`)
	notBulletRes   = []*regexp.Regexp{
		regexp.MustCompile(`^0`),
		regexp.MustCompile(`^[0-9]+ +[0-9~个只-]`),
		regexp.MustCompile(`^[0-9]+\.{2,}`),
	}
	tocTitleRe  = regexp.MustCompile(`(?i)^(contents|目录|目次|tableofcontents|致谢|acknowledge)$`)
	englishRe   = regexp.MustCompile("^[`a-zA-Z0-9\\s.,':;/\"?<>!()\\-]+$")
	allDigitsRe = regexp.MustCompile(`^[0-9]+$`)
	mdLinkRe    = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

func firstMatch(res []*regexp.Regexp, line string) int {
	for i, re := range res {
		if re.MatchString(line) {
			return i
		}
	}
	return -1
}

// bulletGroups are the original's BULLET_PATTERN groups, in its order:
// Chinese law (编/章/节/条/（一）), numeric (第N章, 第N节, 1., 1.1, 1.1.1,
// 1.1.1.1), Chinese outline (章/节/一、/（一）/(1)), English
// (PART/Chapter/Section/Article) and Markdown (# … ######).
//
// Two patterns are stricter than the original's so that the levels mean
// what they say: numeric outline levels are told apart by their number of
// dot-separated parts (the original's "[0-9]{,2}[. 、]" also matched "1.1"
// and lines starting with a bare "." or space), and each Markdown level is
// its exact count of '#' (the original's "^###.*" put h3–h6 on one level).
func bulletGroups() []bulletGroup {
	return []bulletGroup{
		{levels: 5, match: func(l string) int { return firstMatch(lawLevelRes, l) }},
		{levels: 6, match: matchNumeric},
		{levels: 5, match: func(l string) int { return firstMatch(chineseLevelRes, l) }},
		{levels: 4, match: func(l string) int { return firstMatch(englishLevelRes, l) }},
		{levels: 6, match: matchMarkdownLevel},
	}
}

func matchNumeric(line string) int {
	if i := firstMatch(numericChapterRes, line); i >= 0 {
		return i
	}
	m := numericOutlineRe.FindStringSubmatch(line)
	if m == nil {
		return -1
	}
	parts := strings.Count(m[2], ".") + 1
	rest := line[len(m[0]):]
	if rest == "" {
		return -1
	}
	r, _ := utf8.DecodeRuneInString(rest)
	if parts == 1 {
		// "1." "1、" "1 " — and not "1.5" (caught above as two parts).
		if r == '.' || r == '、' || r == ' ' {
			return 2
		}
		return -1
	}
	if r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || strings.ContainsRune("/%~-", r) {
		return -1
	}
	return parts + 1
}

func matchMarkdownLevel(line string) int {
	n := 0
	for n < len(line) && line[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || n == len(line) {
		return -1
	}
	return n - 1
}

func notBullet(line string) bool { return firstMatch(notBulletRes, line) >= 0 }

// isProbableHeadingLine rejects lines that look like body text: long lines,
// HTML table remains, early sentence punctuation, long lines ending a sentence.
func isProbableHeadingLine(line string) bool {
	text := strings.TrimSpace(line)
	if text == "" {
		return false
	}
	if mdHeadingRe.MatchString(text) {
		return true
	}
	if htmlTableTagRe.MatchString(text) {
		return false
	}
	n := utf8.RuneCountInString(text)
	if n > 96 || CountTokens(text) > 72 {
		return false
	}
	if headingPunctRe.MatchString(firstRunes(text, 24)) {
		return false
	}
	for _, end := range []string{"。", "；", "！", "!", "？", "?"} {
		if strings.HasSuffix(text, end) && n > 20 {
			return false
		}
	}
	return true
}

func firstRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

// isMidSentenceBullet: an enumeration marker inside a sentence ("如下：一、…").
func isMidSentenceBullet(line string) bool {
	text := strings.TrimSpace(line)
	if text == "" || mdHeadingRe.MatchString(text) {
		return false
	}
	loc := midBulletRe.FindStringIndex(text)
	if loc == nil || loc[0] == 0 {
		return false
	}
	prev, _ := utf8.DecodeLastRuneInString(text[:loc[0]])
	return prev != '#' && prev != '\n'
}

// bulletsCategory picks the heading group most lines follow, or -1. Markdown
// headings weigh more (4 for h1–h2, 3 for h3–h4, 2 below) so that "一、" in
// the body does not outvote real '#' headings; markers inside sentences
// weigh a tenth and non-Markdown lines that do not look like headings a fifth.
// It looks at every section (the original sampled 100 at random); sections
// marked in code (lines of fenced code, when code is not nil) are never
// headings.
func bulletsCategory(secs []string, code []bool) int {
	groups := bulletGroups()
	hits := make([]float64, len(groups))
	for gi, g := range groups {
		for i, sec := range secs {
			sec = strings.TrimSpace(sec)
			if code != nil && code[i] || g.match(sec) < 0 || notBullet(sec) {
				continue
			}
			w := 1.0
			if gi == groupMarkdown && mdHeadingRe.MatchString(sec) {
				switch level := matchMarkdownLevel(sec) + 1; {
				case level <= 2:
					w = 4
				case level <= 4:
					w = 3
				default:
					w = 2
				}
			}
			if isMidSentenceBullet(sec) {
				w *= 0.1
			}
			if gi != groupMarkdown && !isProbableHeadingLine(sec) {
				w *= 0.2
			}
			hits[gi] += w
		}
	}
	best, maximum := -1, 0.0
	for i, h := range hits {
		if h > maximum {
			best, maximum = i, h
		}
	}
	return best
}

// isEnglish: more than 80% of the sections are plain ASCII text once their
// Markdown decoration is stripped (the original counted "# Title" as not
// English).
func isEnglish(secs []string) bool {
	if len(secs) == 0 {
		return false
	}
	hits := 0
	for _, s := range secs {
		if englishRe.MatchString(tocKey(s)) {
			hits++
		}
	}
	return float64(hits)/float64(len(secs)) > 0.8
}

// tocKey strips Markdown decoration ("## ", "- ", "**", links) from a line
// so that a Markdown table of contents is recognised like a plain one.
func tocKey(s string) string {
	s = strings.TrimSpace(s)
	s = strings.ReplaceAll(s, "**", "")
	s = mdLinkRe.ReplaceAllString(s, "$1")
	return strings.TrimLeft(s, "#-*+ \t")
}

// removeContentsTable drops a table of contents: the "目录"/"Contents" line,
// then everything up to the section that starts like the first entry (the
// chapter the contents point to), looking at most 128 sections ahead — the
// original's remove_contents_table, applied to Markdown-stripped lines.
func removeContentsTable(secs []string, eng bool) []string {
	secs = append([]string(nil), secs...)
	prefixOf := func(s string) string {
		k := tocKey(s)
		if eng {
			f := strings.Fields(k)
			return strings.Join(f[:min(2, len(f))], " ")
		}
		return firstRunes(k, 3)
	}
	for i := 0; i < len(secs); {
		key := strings.Join(strings.FieldsFunc(tocKey(secs[i]), func(r rune) bool { return r == ' ' || r == '\u3000' }), "")
		if !tocTitleRe.MatchString(key) {
			i++
			continue
		}
		secs = append(secs[:i], secs[i+1:]...)
		if i >= len(secs) {
			break
		}
		prefix := prefixOf(secs[i])
		for prefix == "" && i < len(secs) {
			secs = append(secs[:i], secs[i+1:]...)
			if i < len(secs) {
				prefix = prefixOf(secs[i])
			}
		}
		if i >= len(secs) {
			break
		}
		secs = append(secs[:i], secs[i+1:]...) // the first entry
		for j := i; j < min(i+128, len(secs)); j++ {
			if strings.HasPrefix(tocKey(secs[j]), prefix) {
				secs = append(secs[:i], secs[j:]...)
				break
			}
		}
	}
	return secs
}

// fencedLines marks the lines inside fenced code blocks (the fence lines
// included), so that "# comment" in a shell snippet is not a heading.
func fencedLines(secs []string) []bool {
	code := make([]bool, len(secs))
	fence := ""
	for i, s := range secs {
		if fence != "" {
			code[i] = true
			if isFenceClose(s, fence) {
				fence = ""
			}
			continue
		}
		if f, ok := fenceOpen(s); ok {
			fence = f
			code[i] = true
		}
	}
	return code
}

// keepSection: the original drops one-character and number-only sections
// (page numbers) before merging.
func keepSection(s string) bool {
	t := strings.TrimSpace(s)
	return utf8.RuneCountInString(t) > 1 && !allDigitsRe.MatchString(t)
}

// headingText is a heading line without Markdown marks, for Chunk.Headings.
func headingText(s string) string {
	return strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(s), "#"))
}

// merged is a chunk from a heading-aware merge.
type merged struct {
	lines    []string // heading path, then own lines
	headings []string
	anchors  []string // the chunk's own source lines
}

// hierarchicalMerge is the original's hierarchical_merge (book): sections
// are classified into heading levels of group g (headings must also look
// like headings) or body; for the body and the depth-2 deepest heading
// levels, each not yet used section starts a chunk and collects, for every
// shallower level, the nearest heading above it — its heading path.
// Sections before any heading are merged up to min(218, limit) tokens, the
// original's fixed 218.
//
// Unlike the original, chunks come out in document order (it emitted
// heading-only chunks after all body chunks), and consecutive chunks with
// the same heading path are joined while they fit limit tokens, the path
// printed once (the original emitted one chunk per body line; RAGFlow, which
// it follows, re-merges them with naive_merge).
func hierarchicalMerge(g bulletGroup, all []string, code []bool, depth, limit int) []merged {
	var secs []string
	var inCode []bool
	for i, s := range all {
		if keepSection(s) {
			secs = append(secs, s)
			inCode = append(inCode, code != nil && code[i])
		}
	}
	if len(secs) == 0 {
		return nil
	}
	n := g.levels
	levels := make([][]int, n+2) // n heading levels, layout titles (unused), body
	isHeading := make([]bool, len(secs))
	for i, s := range secs {
		if lvl := g.match(strings.TrimSpace(s)); lvl >= 0 && !inCode[i] && isProbableHeadingLine(s) {
			levels[lvl] = append(levels[lvl], i)
			isHeading[i] = true
			continue
		}
		levels[n+1] = append(levels[n+1], i)
	}
	for i, j := 0, len(levels)-1; i < j; i, j = i+1, j-1 {
		levels[i], levels[j] = levels[j], levels[i]
	}
	var cks [][]int // own index first, then its path, deepest first
	read := make([]bool, len(secs))
	for i, arr := range levels[:min(depth, len(levels))] {
		for _, j := range arr {
			if read[j] {
				continue
			}
			read[j] = true
			ck := []int{j}
			if i+1 != len(levels)-1 {
				for ii := i + 1; ii < len(levels); ii++ {
					jj := floorIndex(levels[ii], j)
					if jj < 0 {
						continue
					}
					if levels[ii][jj] > ck[len(ck)-1] {
						ck = ck[:len(ck)-1]
					}
					ck = append(ck, levels[ii][jj])
				}
				for _, x := range ck {
					read[x] = true
				}
			}
			cks = append(cks, ck)
		}
	}
	sort.SliceStable(cks, func(a, b int) bool { return cks[a][0] < cks[b][0] })

	mergeLimit := min(218, limit)
	var out []merged
	lastTok := mergeLimit // forces a new group first
	for _, ck := range cks {
		if len(ck) == 1 {
			s := secs[ck[0]]
			t := CountTokens(s)
			if len(out) > 0 && t+lastTok < mergeLimit {
				m := &out[len(out)-1]
				m.lines = append(m.lines, s)
				m.anchors = append(m.anchors, s)
				if isHeading[ck[0]] {
					m.headings = append(m.headings, headingText(s))
				}
				lastTok += t
				continue
			}
			m := merged{lines: []string{s}, anchors: []string{s}}
			if isHeading[ck[0]] {
				m.headings = []string{headingText(s)}
			}
			out = append(out, m)
			lastTok = t
			continue
		}
		m := merged{anchors: []string{secs[ck[0]]}}
		for x := len(ck) - 1; x >= 0; x-- {
			m.lines = append(m.lines, secs[ck[x]])
			if isHeading[ck[x]] {
				m.headings = append(m.headings, headingText(secs[ck[x]]))
			}
		}
		out = append(out, m)
		lastTok = mergeLimit
	}
	return joinSamePath(out, limit)
}

// joinSamePath joins consecutive chunks whose heading paths (all lines but
// the last) are equal, while the result fits limit.
func joinSamePath(ms []merged, limit int) []merged {
	var out []merged
	for _, m := range ms {
		if len(out) > 0 && len(m.lines) > 1 {
			prev := &out[len(out)-1]
			path := m.lines[:len(m.lines)-1]
			if len(prev.lines) > len(path) && slices.Equal(prev.lines[:len(path)], path) &&
				prev.isBodyAfter(len(path)) &&
				CountTokens(strings.Join(prev.lines, "\n"))+CountTokens(m.lines[len(m.lines)-1]) <= limit {
				own := m.lines[len(m.lines)-1]
				prev.lines = append(prev.lines, own)
				prev.anchors = append(prev.anchors, own)
				continue
			}
		}
		out = append(out, m)
	}
	return out
}

// isBodyAfter: the lines after the first n are the chunk's own (its path is
// exactly n long), i.e. joining another chunk with that path is safe.
func (m merged) isBodyAfter(n int) bool {
	return len(m.lines)-n == len(m.anchors)
}

// floorIndex is the index of the largest element ≤ target in sorted arr, or -1.
func floorIndex(arr []int, target int) int {
	return sort.SearchInts(arr, target+1) - 1
}

// treeNode is a heading with the lines under it (nlp.Node).
type treeNode struct {
	level    int
	texts    []string
	children []*treeNode
}

// buildTree nests (level, text) lines: headings up to depth become nodes,
// deeper lines and body text are appended to the current node.
func buildTree(lines []leveled, depth int) *treeNode {
	root := &treeNode{level: 0}
	stack := []*treeNode{root}
	for _, l := range lines {
		if l.level > depth {
			top := stack[len(stack)-1]
			top.texts = append(top.texts, l.text)
			continue
		}
		for len(stack) > 1 && l.level <= stack[len(stack)-1].level {
			stack = stack[:len(stack)-1]
		}
		node := &treeNode{level: l.level, texts: []string{l.text}}
		stack[len(stack)-1].children = append(stack[len(stack)-1].children, node)
		stack = append(stack, node)
	}
	return root
}

type leveled struct {
	level int
	text  string
}

// flatten emits the original's get_tree: the root's own text, then each
// leaf heading with every ancestor's texts (heading and intro) before it.
func (root *treeNode) flatten() []merged {
	var out []merged
	if len(root.texts) > 0 {
		out = append(out, merged{lines: root.texts, anchors: root.texts})
	}
	var walk func(n *treeNode, path []string, headings []string)
	walk = func(n *treeNode, path, headings []string) {
		p := append(append([]string(nil), path...), n.texts...)
		h := append(append([]string(nil), headings...), headingText(n.texts[0]))
		if len(n.children) == 0 {
			out = append(out, merged{lines: p, headings: h, anchors: n.texts})
			return
		}
		for _, c := range n.children {
			walk(c, p, h)
		}
	}
	for _, c := range root.children {
		walk(c, nil, nil)
	}
	return out
}

// treeMerge is the original's tree_merge (laws): headings of group g are
// levels 1..n, body n+2; the tree is cut at the depth-th distinct level
// present (never the body level), so with 章/节/条 present every 条 is a leaf
// chunk carrying its 章 and 节 lines.
func treeMerge(g bulletGroup, all []string, depth int) []merged {
	var ls []leveled
	levelSet := map[int]bool{}
	for _, s := range all {
		if !keepSection(s) {
			continue
		}
		text := strings.TrimSpace(strings.ReplaceAll(s, "\u3000", " "))
		level := g.levels + 2
		if lvl := g.match(text); lvl >= 0 && isProbableHeadingLine(text) {
			level = lvl + 1
		}
		ls = append(ls, leveled{level, text})
		levelSet[level] = true
	}
	if len(ls) == 0 {
		return nil
	}
	sorted := make([]int, 0, len(levelSet))
	for l := range levelSet {
		sorted = append(sorted, l)
	}
	sort.Ints(sorted)
	target := sorted[len(sorted)-1]
	if depth <= len(sorted) {
		target = sorted[depth-1]
	}
	if target == g.levels+2 {
		target = sorted[0]
		if len(sorted) > 1 {
			target = sorted[len(sorted)-2]
		}
	}
	return buildTree(ls, target).flatten()
}
