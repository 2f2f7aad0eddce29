package docparse

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// parseCSV renders one Markdown table per data row, each repeating the
// header, separated by blank lines — what the original did with pandas
// (dataframe.iloc[[i]].to_markdown()), so that every chunk carries its column
// names. The delimiter (comma, semicolon, tab or pipe) and the encoding
// (UTF-8/UTF-16 with BOM, else GB18030 or Windows-1252) are detected. Blank
// header cells are named "Unnamed: i" and repeated names get ".1", ".2"
// suffixes, as pandas does; blank lines are skipped. A file with only a
// header gives the header table alone. Rows over MaxTableRows are left out
// with a note.
func (p *Parser) parseCSV(ctx context.Context, name string, r io.ReaderAt, size int64) (Result, error) {
	b, err := readAll(r, size)
	if err != nil {
		return Result{}, err
	}
	text := decodeText(b)
	cr := csv.NewReader(strings.NewReader(text))
	cr.Comma = detectDelimiter(text)
	cr.FieldsPerRecord = -1
	cr.LazyQuotes = true
	cr.ReuseRecord = false

	var header []string
	var tables []string
	var warnings []string
	dropped := 0
	for n := 0; ; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return Result{}, err
			}
		}
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Result{}, coded(ErrCorrupt, "%s is not valid CSV: %v", name, err)
		}
		if blankRecord(rec) {
			continue
		}
		if header == nil {
			header = csvHeader(rec)
			continue
		}
		if len(tables) >= p.opts.MaxTableRows {
			dropped++
			continue
		}
		for len(rec) > len(header) {
			header = append(header, "Unnamed: "+strconv.Itoa(len(header)))
		}
		tables = append(tables, markdownTable([][]string{header, rec}))
	}
	if header == nil {
		return Result{}, coded(ErrEmpty, "%s has no rows", name)
	}
	if len(tables) == 0 {
		tables = append(tables, markdownTable([][]string{header}))
	}
	if dropped > 0 {
		tables = append(tables, fmt.Sprintf("_(%d more rows not shown: the limit is %d rows)_", dropped, p.opts.MaxTableRows))
		warnings = append(warnings, fmt.Sprintf("%d rows over the %d-row limit left out", dropped, p.opts.MaxTableRows))
	}
	return Result{Markdown: strings.Join(tables, "\n\n"), Warnings: warnings}, nil
}

func blankRecord(rec []string) bool {
	for _, f := range rec {
		if strings.TrimSpace(f) != "" {
			return false
		}
	}
	return true
}

// csvHeader names blank columns and deduplicates repeated names like
// pandas.read_csv.
func csvHeader(rec []string) []string {
	h := make([]string, len(rec))
	seen := map[string]int{}
	for i, f := range rec {
		f = strings.TrimSpace(f)
		if f == "" {
			f = "Unnamed: " + strconv.Itoa(i)
		}
		base := f
		for seen[f] > 0 {
			f = base + "." + strconv.Itoa(seen[base])
			seen[base]++
		}
		seen[f]++
		h[i] = f
	}
	return h
}

// detectDelimiter picks the candidate that splits the first lines into the
// most columns consistently, ignoring quoted text; comma by default.
func detectDelimiter(text string) rune {
	var lines []string
	for line := range strings.Lines(text) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		lines = append(lines, line)
		if len(lines) == 10 {
			break
		}
	}
	best, bestScore := ',', 0
	for _, d := range []rune{',', ';', '\t', '|'} {
		counts := make([]int, len(lines))
		for i, l := range lines {
			counts[i] = countOutsideQuotes(l, d)
		}
		if len(counts) == 0 || counts[0] == 0 {
			continue
		}
		consistent := 0
		for _, n := range counts {
			if n == counts[0] {
				consistent++
			}
		}
		// Prefer delimiters that agree on most lines, then more columns.
		score := consistent*1000 + counts[0]
		if score > bestScore {
			best, bestScore = d, score
		}
	}
	return best
}

func countOutsideQuotes(line string, d rune) int {
	n, quoted := 0, false
	for _, r := range line {
		switch {
		case r == '"':
			quoted = !quoted
		case r == d && !quoted:
			n++
		}
	}
	return n
}
