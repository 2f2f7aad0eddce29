package kb

import (
	"archive/zip"
	"bufio"
	"context"
	"encoding/csv"
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// ExportFormats are the formats of GET …/export (the original's enum).
var ExportFormats = map[string]string{
	"csv":  "text/csv; charset=utf-8",
	"xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
	"md":   "text/markdown; charset=utf-8",
	"txt":  "text/plain; charset=utf-8",
}

// Export is a prepared export: its file name and content type are known
// before the first byte is written, so that an error (a bad format, no
// access) is still an ordinary error answer.
type Export struct {
	Filename    string
	ContentType string
	write       func(w io.Writer) error
}

// Write streams the export: every committed chunk of the knowledge base,
// by file name and chunk index, read in pages of 500 chunks.
func (e Export) Write(w io.Writer) error { return e.write(w) }

// exportRow is one chunk of an export.
type exportRow struct {
	FileID, Filename, ChunkID string
	Index, Tokens             int
	Content                   string
}

// Export prepares the export of a knowledge base sub reads, in format (csv,
// xlsx, md or txt; the original's default csv). The original can also add
// the chunks' vectors; vectors stay in the vector store here, so
// include_vectors is refused (422) rather than silently ignored.
func (l *Library) Export(ctx context.Context, sub access.Subject, kbID, format string, includeVectors bool) (Export, error) {
	k, err := l.store.Get(ctx, sub, kbID)
	if err != nil {
		return Export{}, err
	}
	if format == "" {
		format = "csv"
	}
	ct, ok := ExportFormats[format]
	if !ok {
		return Export{}, failure.Unprocessable("invalid_export_format", "format must be csv, xlsx, md or txt, not %q", format)
	}
	if includeVectors {
		return Export{}, failure.Unprocessable("vectors_not_exported", "include_vectors is not supported: vectors live in the vector store")
	}
	name := fmt.Sprintf("export_%s_%s.%s", kbID, time.Now().UTC().Format("20060102_150405"), format)
	each := func(fn func(exportRow) error) error { return l.store.eachChunk(ctx, kbID, fn) }
	var write func(io.Writer) error
	switch format {
	case "csv":
		write = func(w io.Writer) error {
			cw := csv.NewWriter(w)
			_ = cw.Write([]string{"file_id", "filename", "chunk_id", "chunk_index", "token_count", "content"})
			err := each(func(r exportRow) error {
				return cw.Write([]string{r.FileID, r.Filename, r.ChunkID, strconv.Itoa(r.Index), strconv.Itoa(r.Tokens), r.Content})
			})
			cw.Flush()
			if err != nil {
				return err
			}
			return cw.Error()
		}
	case "md", "txt":
		write = func(w io.Writer) error {
			bw := bufio.NewWriter(w)
			if format == "md" {
				fmt.Fprintf(bw, "# %s\n", k.Name)
			} else {
				fmt.Fprintf(bw, "%s\n", k.Name)
			}
			last := ""
			err := each(func(r exportRow) error {
				if r.FileID != last {
					last = r.FileID
					if format == "md" {
						fmt.Fprintf(bw, "\n## %s\n", r.Filename)
					} else {
						fmt.Fprintf(bw, "\n==== %s ====\n", r.Filename)
					}
				}
				if format == "md" {
					fmt.Fprintf(bw, "\n### Chunk %d\n\n%s\n", r.Index, r.Content)
				} else {
					fmt.Fprintf(bw, "\n[%d] %s\n", r.Index, r.Content)
				}
				return nil
			})
			if err != nil {
				return err
			}
			return bw.Flush()
		}
	case "xlsx":
		write = func(w io.Writer) error { return writeXLSX(w, each) }
	}
	return Export{Filename: name, ContentType: ct, write: write}, nil
}

// eachChunk calls fn for every chunk of kbID in (filename, file, index)
// order, keyset-paged so that a large knowledge base is never held at once.
func (s *Store) eachChunk(ctx context.Context, kbID string, fn func(exportRow) error) error {
	var afterName, afterFile string
	afterIndex := -1
	for {
		rows, err := s.pool.Query(ctx, `SELECT f.file_id, f.filename, c.chunk_id, c.chunk_index, c.token_count, c.content
			FROM knowledge_chunks c JOIN knowledge_files f ON f.file_id = c.file_id
			WHERE c.kb_id = $1 AND (f.filename, f.file_id, c.chunk_index) > ($2, $3, $4)
			ORDER BY f.filename, f.file_id, c.chunk_index LIMIT 500`, kbID, afterName, afterFile, afterIndex)
		if err != nil {
			return fmt.Errorf("export chunks: %w", err)
		}
		var page []exportRow
		for rows.Next() {
			var r exportRow
			if err := rows.Scan(&r.FileID, &r.Filename, &r.ChunkID, &r.Index, &r.Tokens, &r.Content); err != nil {
				rows.Close()
				return err
			}
			page = append(page, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, r := range page {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(page) < 500 {
			return nil
		}
		last := page[len(page)-1]
		afterName, afterFile, afterIndex = last.Filename, last.FileID, last.Index
	}
}

// writeXLSX writes a one-sheet Office Open XML workbook with inline strings
// (no shared-string table, so rows stream).
func writeXLSX(w io.Writer, each func(func(exportRow) error) error) error {
	z := zip.NewWriter(w)
	parts := map[string]string{
		"[Content_Types].xml": `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>`,
		"_rels/.rels": `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>`,
		"xl/workbook.xml": `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="chunks" sheetId="1" r:id="rId1"/></sheets></workbook>`,
		"xl/_rels/workbook.xml.rels": `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>`,
	}
	for _, name := range []string{"[Content_Types].xml", "_rels/.rels", "xl/workbook.xml", "xl/_rels/workbook.xml.rels"} {
		f, err := z.Create(name)
		if err != nil {
			return err
		}
		if _, err := io.WriteString(f, parts[name]); err != nil {
			return err
		}
	}
	f, err := z.Create("xl/worksheets/sheet1.xml")
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	bw.WriteString(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` + "\n" +
		`<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>`)
	row := func(cells ...string) {
		bw.WriteString("<row>")
		for _, c := range cells {
			bw.WriteString(`<c t="inlineStr"><is><t xml:space="preserve">`)
			_ = xml.EscapeText(bw, []byte(xmlSafe(c)))
			bw.WriteString("</t></is></c>")
		}
		bw.WriteString("</row>")
	}
	row("file_id", "filename", "chunk_id", "chunk_index", "token_count", "content")
	if err := each(func(r exportRow) error {
		row(r.FileID, r.Filename, r.ChunkID, strconv.Itoa(r.Index), strconv.Itoa(r.Tokens), r.Content)
		return nil
	}); err != nil {
		return err
	}
	bw.WriteString("</sheetData></worksheet>")
	if err := bw.Flush(); err != nil {
		return err
	}
	return z.Close()
}

// xmlSafe drops the characters XML 1.0 cannot carry (control characters
// other than tab, newline and carriage return).
func xmlSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0xFFFE || r == 0xFFFF {
			return -1
		}
		return r
	}, s)
}
