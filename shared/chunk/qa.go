package chunk

import (
	"encoding/csv"
	"path"
	"regexp"
	"strings"
)

var (
	// Chinese prefixes may be followed by a space alone; Latin ones need a
	// colon or tab, so that an answer "A lot of …" keeps its "A" (the
	// original stripped any of them before a space).
	qaPrefixRe         = regexp.MustCompile(`(?i)^(?:(?:问题|答案|回答|问|答)[\t:： ]+|(?:user|assistant|question|answer|q|a)[ ]*[\t:：][\t:： ]*)`)
	qaQuestionPrefixRe = regexp.MustCompile(`(?i)^(Q|Question|问|问题)\s*[:：]`)
	qaAnswerPrefixRe   = regexp.MustCompile(`(?i)^(A|Answer|答|回答)\s*[:：]`)
	tableDelimRowRe    = regexp.MustCompile(`^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$`)
)

type qaPair struct{ q, a string }

// splitQA is the qa preset: (question, answer) pairs extracted by file
// suffix, deduplicated, each a chunk "问题：{q}\t回答：{a}" (or "Question:
// {q}\tAnswer: {a}" for language English). No token limit applies.
//
//	.xlsx .xls          Markdown tables, else delimiter pairs
//	.csv                Markdown tables + CSV rows (tab or comma)
//	.txt                delimiter pairs (tab or comma, whichever splits more lines in two)
//	.md .markdown .mdx .docx  heading hierarchy (stacked headings = question, body = answer)
//	                    + tables, else Q:/A: prefixes
//	other               headings + tables + Q:/A: prefixes, else delimiter pairs
//
// Nothing found: consecutive lines are paired. Table pairs come from GFM
// tables only (header row + delimiter row), the header row skipped, and table
// lines are not repeated in heading answers (the original took every line
// with a '|' as a row, header rows included, and kept tables in answers).
func splitQA(md string, cfg Config, filename string) []piece {
	eng := cfg.Language == "English"
	suffix := strings.ToLower(path.Ext(filename))
	var ls []string // non-blank lines, as they are
	for _, l := range lines(md) {
		if strings.TrimSpace(l) != "" {
			ls = append(ls, l)
		}
	}
	tables, tableLines := markdownTablePairs(md)
	var pairs []qaPair
	switch suffix {
	case ".xlsx", ".xls":
		pairs = append(pairs, tables...)
		if len(pairs) == 0 {
			pairs = delimiterPairs(ls, guessDelimiter(ls))
		}
	case ".csv":
		pairs = append(pairs, tables...)
		delim := ","
		if strings.Contains(md, "\t") {
			delim = "\t"
		}
		pairs = append(pairs, csvPairs(ls, delim)...)
	case ".txt":
		pairs = delimiterPairs(ls, guessDelimiter(ls))
	case ".md", ".markdown", ".mdx", ".docx":
		pairs = append(pairs, headingPairs(md, tableLines)...)
		pairs = append(pairs, tables...)
		if len(pairs) == 0 {
			pairs = prefixPairs(ls)
		}
	default:
		pairs = append(pairs, headingPairs(md, tableLines)...)
		pairs = append(pairs, tables...)
		pairs = append(pairs, prefixPairs(ls)...)
		if len(pairs) == 0 {
			pairs = delimiterPairs(ls, guessDelimiter(ls))
		}
	}
	pairs = dedupePairs(pairs)
	if len(pairs) == 0 {
		for i := 0; i+1 < len(ls); i += 2 {
			if q, a := strings.TrimSpace(ls[i]), strings.TrimSpace(ls[i+1]); q != "" && a != "" {
				pairs = append(pairs, qaPair{q, a})
			}
		}
	}
	qp, ap := "问题：", "回答："
	if eng {
		qp, ap = "Question: ", "Answer: "
	}
	out := make([]piece, 0, len(pairs))
	for _, p := range pairs {
		q, a := rmQAPrefix(p.q), rmQAPrefix(p.a)
		anchors := append(trimmedLines(q), trimmedLines(a)...)
		out = append(out, piece{text: qp + q + "\t" + ap + a, anchors: anchors})
	}
	return out
}

func rmQAPrefix(s string) string {
	return qaPrefixRe.ReplaceAllString(strings.TrimSpace(s), "")
}

// guessDelimiter: tab unless more lines split into exactly two by a comma.
func guessDelimiter(ls []string) string {
	comma, tab := 0, 0
	for _, l := range ls {
		if len(strings.Split(l, ",")) == 2 {
			comma++
		}
		if len(strings.Split(l, "\t")) == 2 {
			tab++
		}
	}
	if tab >= comma {
		return "\t"
	}
	return ","
}

// delimiterPairs: a line splitting into two starts a pair; other lines
// continue the current answer. A question whose answer stays empty is
// dropped when the next pair starts, as in the original.
func delimiterPairs(ls []string, delim string) []qaPair {
	return rowPairs(ls, func(l string) []string { return strings.Split(l, delim) })
}

// csvPairs is delimiterPairs with CSV quoting.
func csvPairs(ls []string, delim string) []qaPair {
	return rowPairs(ls, func(l string) []string {
		r := csv.NewReader(strings.NewReader(l))
		r.Comma = []rune(delim)[0]
		r.LazyQuotes = true
		r.FieldsPerRecord = -1
		rec, err := r.Read()
		if err != nil {
			return strings.Split(l, delim)
		}
		return rec
	})
}

func rowPairs(ls []string, split func(string) []string) []qaPair {
	var pairs []qaPair
	q, a := "", ""
	for _, l := range ls {
		arr := split(l)
		if len(arr) != 2 {
			if q != "" {
				a += "\n" + l
			}
			continue
		}
		if q != "" && a != "" {
			pairs = append(pairs, qaPair{q, a})
		}
		q, a = arr[0], arr[1]
	}
	if q != "" {
		pairs = append(pairs, qaPair{q, a})
	}
	var out []qaPair
	for _, p := range pairs {
		if strings.TrimSpace(p.q) != "" {
			out = append(out, qaPair{strings.TrimSpace(p.q), strings.TrimSpace(p.a)})
		}
	}
	return out
}

// tableCells splits a table row into trimmed cells.
func tableCells(row string) []string {
	t := strings.TrimSpace(row)
	t = strings.TrimPrefix(t, "|")
	t = strings.TrimSuffix(t, "|")
	cells := strings.Split(t, "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

// isTableStart: row i is a table header (it has a '|' and the next line is a
// delimiter row with as many cells).
func isTableStart(ls []string, i int) bool {
	if i+1 >= len(ls) || !strings.Contains(ls[i], "|") || !tableDelimRowRe.MatchString(ls[i+1]) {
		return false
	}
	if !strings.Contains(ls[i+1], "|") && !strings.Contains(strings.TrimSpace(ls[i]), "|") {
		return false
	}
	return len(tableCells(ls[i])) == len(tableCells(ls[i+1]))
}

// markdownTablePairs takes column 1 as the question and column 2 as the
// answer of every body row of every GFM table; it also reports which lines
// (by index in lines(md)) belong to tables that gave pairs.
func markdownTablePairs(md string) ([]qaPair, map[int]bool) {
	ls := lines(md)
	var pairs []qaPair
	used := map[int]bool{}
	for i := 0; i < len(ls); i++ {
		if !isTableStart(ls, i) {
			continue
		}
		j := i + 2
		var got []qaPair
		for ; j < len(ls) && strings.TrimSpace(ls[j]) != "" && strings.Contains(ls[j], "|"); j++ {
			cells := tableCells(ls[j])
			if len(cells) >= 2 && cells[0] != "" && cells[1] != "" {
				got = append(got, qaPair{cells[0], cells[1]})
			}
		}
		if len(got) > 0 {
			pairs = append(pairs, got...)
			for k := i; k < j; k++ {
				used[k] = true
			}
		}
		i = j - 1
	}
	return pairs, used
}

// headingPairs: the stacked heading texts (outer first, one per line) are
// the question, the text under the innermost heading its answer. Lines in
// fenced code are never headings; table lines (skip) are left out of answers.
func headingPairs(md string, skip map[int]bool) []qaPair {
	var pairs []qaPair
	var answer strings.Builder
	var questions []string
	var levels []int
	inCode := false
	flush := func() {
		if a := strings.TrimSpace(answer.String()); a != "" {
			if q := strings.Join(questions, "\n"); q != "" {
				pairs = append(pairs, qaPair{q, a})
			}
		}
		answer.Reset()
	}
	for i, l := range lines(md) {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inCode = !inCode
		}
		level, title, ok := 0, "", false
		if !inCode {
			level, title, ok = atxHeading(l)
		}
		if !ok {
			if !skip[i] {
				answer.WriteString("\n" + l)
			}
			continue
		}
		flush()
		for len(levels) > 0 && level <= levels[len(levels)-1] {
			questions, levels = questions[:len(questions)-1], levels[:len(levels)-1]
		}
		questions = append(questions, title)
		levels = append(levels, level)
	}
	flush()
	return pairs
}

// prefixPairs: "Q:/问:" lines start a question, "A:/答:" lines (and any
// lines after them) form its answer.
func prefixPairs(ls []string) []qaPair {
	var pairs []qaPair
	q := ""
	var ans []string
	for _, raw := range ls {
		l := strings.TrimSpace(raw)
		if loc := qaQuestionPrefixRe.FindStringIndex(l); loc != nil {
			if q != "" {
				pairs = append(pairs, qaPair{q, strings.Join(ans, "\n")})
			}
			q, ans = strings.TrimSpace(l[loc[1]:]), nil
			continue
		}
		if loc := qaAnswerPrefixRe.FindStringIndex(l); loc != nil {
			ans = append(ans, strings.TrimSpace(l[loc[1]:]))
			continue
		}
		if q != "" {
			ans = append(ans, l)
		}
	}
	if q != "" {
		pairs = append(pairs, qaPair{q, strings.Join(ans, "\n")})
	}
	var out []qaPair
	for _, p := range pairs {
		if strings.TrimSpace(p.q) != "" && strings.TrimSpace(p.a) != "" {
			out = append(out, p)
		}
	}
	return out
}

func dedupePairs(pairs []qaPair) []qaPair {
	seen := map[qaPair]bool{}
	var out []qaPair
	for _, p := range pairs {
		p = qaPair{strings.TrimSpace(p.q), strings.TrimSpace(p.a)}
		if p.q == "" || p.a == "" || seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, p)
	}
	return out
}
