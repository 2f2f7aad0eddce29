package chunk

import (
	"regexp"
	"strings"
)

// A small line-based Markdown block scanner for the semantic preset (the
// original parsed with markdown-it, commonmark + table + dollarmath). It
// knows ATX and setext headings, fenced and indented code, GFM tables, lists,
// $$ math blocks, HTML blocks, thematic breaks and paragraphs; inline syntax
// is left alone. Blocks keep their source lines.

var (
	atxRe         = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$`)
	atxCloseRe    = regexp.MustCompile(`(?:^|[ \t]+)#+$`)
	fenceOpenRe   = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})(.*)$")
	setextRe      = regexp.MustCompile(`^ {0,3}(=+|-+)[ \t]*$`)
	thematicRe    = regexp.MustCompile(`^ {0,3}((\*[ \t]*){3,}|(-[ \t]*){3,}|(_[ \t]*){3,})$`)
	listItemRe    = regexp.MustCompile(`^[ \t]*([-*+]|([0-9]{1,9})[.)])([ \t]+|$)`)
	htmlBlockRe   = regexp.MustCompile(`^ {0,3}<(!--|/?[A-Za-z][A-Za-z0-9-]*([ \t>/]|$))`)
	imageOnlyRe   = regexp.MustCompile(`^!\[[^\]]*\]\([^)]*\)\s*$`)
	imagePrefixRe = regexp.MustCompile(`^!\[[^\]]*\]\([^)]*\)`)
	captionRe     = regexp.MustCompile(`(?i)^(?:Figure|图|Fig\.|表|Table)\s*[\p{L}\p{N}_.]+`)
)

// fenceOpen reports a fence opening line and its fence ("```", "~~~~", …).
func fenceOpen(line string) (string, bool) {
	m := fenceOpenRe.FindStringSubmatch(line)
	if m == nil || (m[1][0] == '`' && strings.Contains(m[2], "`")) {
		return "", false
	}
	return m[1], true
}

func isFenceClose(line, fence string) bool {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return false
	}
	t = strings.TrimRight(t, " \t")
	return len(t) >= len(fence) && strings.Trim(t, fence[:1]) == ""
}

// atxHeading parses "## Title ##" into (2, "Title").
func atxHeading(line string) (int, string, bool) {
	m := atxRe.FindStringSubmatch(strings.TrimRight(line, "\r"))
	if m == nil {
		return 0, "", false
	}
	title := strings.TrimSpace(atxCloseRe.ReplaceAllString(m[2], ""))
	return len(m[1]), title, true
}

func indentOf(line string) int {
	n := 0
	for _, r := range line {
		switch r {
		case ' ':
			n++
		case '\t':
			n += 4 - n%4
		default:
			return n
		}
	}
	return n
}

func isBlank(s string) bool { return strings.TrimSpace(s) == "" }

type blockKind int

const (
	blockParagraph blockKind = iota
	blockHeading
	blockFence
	blockCode
	blockTable
	blockList
	blockMath
	blockHTML
)

type block struct {
	kind  blockKind
	level int      // headings
	title string   // headings
	lines []string // source lines (paragraph lines trimmed)
}

func (b block) text() string { return strings.Join(b.lines, "\n") }

// startsBlock: the line begins a block that ends a lazy list continuation.
func startsBlock(line string) bool {
	if _, _, ok := atxHeading(line); ok {
		return true
	}
	if _, ok := fenceOpen(line); ok {
		return true
	}
	t := strings.TrimSpace(line)
	return thematicRe.MatchString(line) || strings.HasPrefix(t, "$$") || htmlBlockRe.MatchString(line)
}

func isTableAt(ls []string, i int) bool {
	return indentOf(ls[i]) < 4 && isTableStart(ls, i)
}

func scanBlocks(md string) []block {
	ls := strings.Split(md, "\n")
	for i := range ls {
		ls[i] = strings.TrimRight(ls[i], "\r")
	}
	var out []block
	var para []string
	flushPara := func() {
		if len(para) > 0 {
			out = append(out, block{kind: blockParagraph, lines: para})
			para = nil
		}
	}
	for i := 0; i < len(ls); {
		line := ls[i]
		if isBlank(line) {
			flushPara()
			i++
			continue
		}
		if indentOf(line) >= 4 && len(para) == 0 {
			j := i
			for j < len(ls) && (isBlank(ls[j]) || indentOf(ls[j]) >= 4) {
				j++
			}
			k := j
			for k > i && isBlank(ls[k-1]) {
				k--
			}
			out = append(out, block{kind: blockCode, lines: ls[i:k]})
			i = j
			continue
		}
		if indentOf(line) >= 4 { // lazy paragraph continuation
			para = append(para, strings.TrimSpace(line))
			i++
			continue
		}
		if fence, ok := fenceOpen(line); ok {
			flushPara()
			j := i + 1
			for j < len(ls) && !isFenceClose(ls[j], fence) {
				j++
			}
			end := min(j+1, len(ls))
			out = append(out, block{kind: blockFence, lines: ls[i:end]})
			i = end
			continue
		}
		if level, title, ok := atxHeading(line); ok {
			flushPara()
			out = append(out, block{kind: blockHeading, level: level, title: title, lines: []string{line}})
			i++
			continue
		}
		if len(para) > 0 {
			if m := setextRe.FindStringSubmatch(line); m != nil {
				level := 2
				if m[1][0] == '=' {
					level = 1
				}
				out = append(out, block{kind: blockHeading, level: level, title: strings.Join(para, " "),
					lines: append(append([]string(nil), para...), line)})
				para = nil
				i++
				continue
			}
		}
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "$$") {
			flushPara()
			j := i
			if !(len(t) > 4 && strings.HasSuffix(t, "$$")) {
				for j = i + 1; j < len(ls) && !strings.Contains(ls[j], "$$"); j++ {
				}
			}
			end := min(j+1, len(ls))
			out = append(out, block{kind: blockMath, lines: ls[i:end]})
			i = end
			continue
		}
		if isTableAt(ls, i) {
			flushPara()
			j := i + 2
			for j < len(ls) && !isBlank(ls[j]) && strings.Contains(ls[j], "|") && !startsBlock(ls[j]) {
				j++
			}
			out = append(out, block{kind: blockTable, lines: ls[i:j]})
			i = j
			continue
		}
		if thematicRe.MatchString(line) {
			flushPara()
			i++
			continue
		}
		if m := listItemRe.FindStringSubmatch(line); m != nil && (len(para) == 0 || m[2] == "" || m[2] == "1") {
			flushPara()
			j := scanList(ls, i)
			out = append(out, block{kind: blockList, lines: ls[i:j]})
			i = j
			continue
		}
		if len(para) == 0 && htmlBlockRe.MatchString(line) {
			j := i
			for j < len(ls) && !isBlank(ls[j]) {
				j++
			}
			out = append(out, block{kind: blockHTML, lines: ls[i:j]})
			i = j
			continue
		}
		para = append(para, t)
		i++
	}
	flushPara()
	return out
}

// scanList returns the end (exclusive) of the list starting at line i:
// items, indented continuation, lazy continuation lines, and blank lines
// followed by more of the list.
func scanList(ls []string, i int) int {
	j := i + 1
	inFence := ""
	if f, ok := fenceOpen(strings.TrimLeft(ls[i], " \t-*+0123456789.)")); ok {
		inFence = f
	}
	for j < len(ls) {
		l := ls[j]
		if inFence != "" {
			if isFenceClose(strings.TrimSpace(l), inFence) {
				inFence = ""
			}
			j++
			continue
		}
		if isBlank(l) {
			k := j + 1
			for k < len(ls) && isBlank(ls[k]) {
				k++
			}
			if k < len(ls) && (indentOf(ls[k]) >= 2 || listItemRe.MatchString(ls[k]) && !thematicRe.MatchString(ls[k])) {
				j = k
				continue
			}
			break
		}
		if indentOf(l) < 2 && !listItemRe.MatchString(l) {
			if startsBlock(l) || isTableAt(ls, j) {
				break
			}
		} else if thematicRe.MatchString(l) && indentOf(l) < 2 {
			break
		}
		if f, ok := fenceOpen(strings.TrimSpace(l)); ok {
			inFence = f
		}
		j++
	}
	return j
}
