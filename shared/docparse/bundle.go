package docparse

import (
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
)

// parseBundle reads a .zip Markdown bundle (a MinerU export, a zipped docs
// folder): the main Markdown file plus the images it references, with the
// links rewritten to the images' archive paths (Image.Name).
//
// The main file is the only .md at the shallowest level that has any (a
// single wrapping folder is fine); when there are several there, full.md
// (MinerU), index.md or README.md is chosen, in that order; otherwise the
// bundle is rejected as ambiguous. (The original took full.md or the first
// .md anywhere.)
//
// Safety, checked on the central directory before anything is
// decompressed: at most MaxArchiveEntries entries; no absolute paths, drive
// letters, backslashes, ".." segments or symlinks; no nested .zip; declared
// total size at most MaxArchiveBytes; entries of 1 MiB or more compressed
// better than MaxCompressionRatio:1 are zip bombs. Reading then stops at the
// declared sizes (archive/zip enforces them), so a lying header cannot make
// it decompress more. Encrypted entries are encrypted_file.
func (p *Parser) parseBundle(ctx context.Context, name string, r io.ReaderAt, size int64) (Result, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return Result{}, coded(ErrCorrupt, "%s is not a readable ZIP archive: %v", name, err)
	}
	if n := len(zr.File); n > p.opts.MaxArchiveEntries {
		return Result{}, p.rejected(name, "max_entries", "it has %d entries; the limit is %d", n, p.opts.MaxArchiveEntries)
	}
	files := map[string]*zip.File{}
	var total uint64
	for _, f := range zr.File {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		if err := p.checkEntry(name, f); err != nil {
			return Result{}, err
		}
		total += f.UncompressedSize64
		if total > uint64(p.opts.MaxArchiveBytes) {
			return Result{}, p.rejected(name, "max_uncompressed_bytes", "its entries decompress to more than %s", humanBytes(p.opts.MaxArchiveBytes))
		}
		if f.FileInfo().IsDir() || ignoredEntry(f.Name) {
			continue
		}
		files[f.Name] = f
	}
	main, err := mainMarkdown(name, files)
	if err != nil {
		return Result{}, err
	}
	budget := p.opts.MaxArchiveBytes
	raw, err := readEntry(name, files[main], &budget)
	if err != nil {
		return Result{}, err
	}
	md := normalizeNewlines(decodeText(raw))
	imgs := p.newImageSet()
	b := &bundle{name: name, files: files, dir: path.Dir(main), budget: &budget, imgs: imgs}
	md, err = b.rewriteImages(md)
	if err != nil {
		return Result{}, err
	}
	return Result{Markdown: md, Images: imgs.images, Warnings: append(imgs.warnings, b.warnings...)}, nil
}

func (p *Parser) rejected(name, limit, format string, args ...any) error {
	e := coded(ErrArchiveRejected, "%s was rejected: %s", name, fmt.Sprintf(format, args...))
	return e.With(map[string]any{"limit": limit})
}

// bombFloor is the entry size from which the compression ratio is checked:
// tiny text files legitimately compress very well.
const bombFloor = 1 << 20

func (p *Parser) checkEntry(name string, f *zip.File) error {
	if !safeEntryName(f.Name) {
		return p.rejected(name, "unsafe_path", "entry %q points outside the archive (absolute path, drive letter, backslash or \"..\")", f.Name)
	}
	if f.Mode()&fs.ModeSymlink != 0 {
		return p.rejected(name, "unsafe_path", "entry %q is a symbolic link", f.Name)
	}
	if f.Flags&0x1 != 0 {
		return coded(ErrEncrypted, "%s is password-protected (entry %q is encrypted); upload an unencrypted archive", name, f.Name)
	}
	if strings.EqualFold(path.Ext(f.Name), extZIP) {
		return p.rejected(name, "nested_archive", "entry %q is a nested ZIP archive; unpack it and zip the Markdown bundle directly", f.Name)
	}
	if f.UncompressedSize64 >= bombFloor {
		ratio := uint64(p.opts.MaxCompressionRatio)
		if f.CompressedSize64 == 0 || f.UncompressedSize64/max(f.CompressedSize64, 1) > ratio {
			return p.rejected(name, "compression_ratio", "entry %q expands from %s to %s, more than %d:1 (a zip bomb?)",
				f.Name, humanBytes(int64(f.CompressedSize64)), humanBytes(int64(min(f.UncompressedSize64, 1<<62))), ratio)
		}
	}
	return nil
}

// safeEntryName accepts relative, forward-slash paths that stay inside the
// archive.
func safeEntryName(n string) bool {
	switch {
	case n == "", strings.ContainsRune(n, '\\'), strings.ContainsRune(n, 0),
		strings.HasPrefix(n, "/"), len(n) >= 2 && n[1] == ':':
		return false
	}
	for _, seg := range strings.Split(strings.TrimSuffix(n, "/"), "/") {
		if seg == ".." {
			return false
		}
	}
	return true
}

// ignoredEntry skips macOS metadata.
func ignoredEntry(n string) bool {
	base := path.Base(n)
	return strings.HasPrefix(n, "__MACOSX/") || strings.HasPrefix(base, "._") || base == ".DS_Store"
}

func isMarkdownName(n string) bool {
	ext := strings.ToLower(path.Ext(n))
	return ext == ".md" || ext == ".markdown"
}

func mainMarkdown(name string, files map[string]*zip.File) (string, error) {
	var mds []string
	for n := range files {
		if isMarkdownName(n) {
			mds = append(mds, n)
		}
	}
	if len(mds) == 0 {
		for n := range files {
			if part, ok := ooxmlMainParts[strings.ToLower(n)]; ok {
				return "", coded(ErrWrongType, "%s is %s, not a Markdown bundle; rename it to %s", name, formatTitle[part], part)
			}
		}
		return "", coded(ErrArchiveRejected, "%s has no Markdown (.md) file; a ZIP upload must be a Markdown bundle", name)
	}
	depth := func(n string) int { return strings.Count(n, "/") }
	top := depth(slices.MinFunc(mds, func(a, b string) int { return depth(a) - depth(b) }))
	var cands []string
	for _, n := range mds {
		if depth(n) == top {
			cands = append(cands, n)
		}
	}
	slices.Sort(cands)
	if len(cands) == 1 {
		return cands[0], nil
	}
	for _, want := range []string{"full.md", "index.md", "readme.md"} {
		for _, n := range cands {
			if strings.EqualFold(path.Base(n), want) {
				return n, nil
			}
		}
	}
	return "", coded(ErrArchiveRejected, "%s has several top-level Markdown files (%s); keep one, or name the main one index.md or README.md",
		name, strings.Join(cands, ", "))
}

// readEntry reads one entry, spending the shared budget.
func readEntry(name string, f *zip.File, budget *int64) ([]byte, error) {
	if f.UncompressedSize64 > uint64(max(*budget, 0)) {
		return nil, coded(ErrArchiveRejected, "%s was rejected: it decompresses to more than the size limit", name)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, coded(ErrCorrupt, "%s: cannot open entry %q: %v", name, f.Name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, *budget+1))
	if err != nil {
		return nil, coded(ErrCorrupt, "%s: entry %q is damaged: %v", name, f.Name, err)
	}
	if int64(len(b)) > *budget {
		return nil, coded(ErrArchiveRejected, "%s was rejected: it decompresses to more than the size limit", name)
	}
	*budget -= int64(len(b))
	return b, nil
}

var bundleImageExts = []string{".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".svg", ".tif", ".tiff"}

type bundle struct {
	name     string
	files    map[string]*zip.File
	dir      string // of the main Markdown file
	budget   *int64
	imgs     *imageSet
	warnings []string
	byBase   map[string][]string // lower-case base name → image entries
}

var (
	mdImageLink  = regexp.MustCompile(`(!\[[^\]]*\]\(\s*)(<[^>]*>|[^)\s]+)((?:\s+(?:"[^"]*"|'[^']*'))?\s*\))`)
	htmlImageSrc = regexp.MustCompile(`(?i)(<img\b[^>]*?\bsrc\s*=\s*["'])([^"']+)(["'])`)
)

// rewriteImages extracts the images the Markdown links to and points the
// links at their archive paths. Remote and unresolvable links stay as they
// are (the latter with a warning).
func (b *bundle) rewriteImages(md string) (string, error) {
	var firstErr error
	replace := func(re *regexp.Regexp) {
		md = re.ReplaceAllStringFunc(md, func(m string) string {
			if firstErr != nil {
				return m
			}
			sub := re.FindStringSubmatch(m)
			target := strings.TrimSuffix(strings.TrimPrefix(sub[2], "<"), ">")
			entry, ok := b.resolve(target)
			if !ok {
				return m
			}
			f := b.files[entry]
			if !b.imgs.admit(entry, int64(f.UncompressedSize64)) {
				return m
			}
			data, err := readEntry(b.name, f, b.budget)
			if err != nil {
				firstErr = err
				return m
			}
			if !b.imgs.add(entry, "", data) {
				return m
			}
			link := entry
			if strings.ContainsAny(link, " ()") {
				link = "<" + link + ">"
			}
			return sub[1] + link + sub[3]
		})
	}
	replace(mdImageLink)
	replace(htmlImageSrc)
	return md, firstErr
}

// resolve maps a link target to an image entry: relative to the Markdown
// file, then from the archive root, then by a unique base name (as the
// original matched MinerU's images/ links).
func (b *bundle) resolve(target string) (string, bool) {
	if target == "" || strings.HasPrefix(target, "//") || strings.HasPrefix(target, "#") {
		return "", false
	}
	if u, err := url.Parse(target); err == nil && u.Scheme != "" {
		return "", false // http:, https:, data:
	}
	if i := strings.IndexAny(target, "?#"); i >= 0 {
		target = target[:i]
	}
	if u, err := url.PathUnescape(target); err == nil {
		target = u
	}
	if !slices.Contains(bundleImageExts, strings.ToLower(path.Ext(target))) {
		return "", false
	}
	var cands []string
	if strings.HasPrefix(target, "/") {
		cands = append(cands, path.Clean(target)[1:])
	} else {
		cands = append(cands, path.Join(b.dir, target), path.Clean(target))
	}
	for _, c := range cands {
		if c == "" || strings.HasPrefix(c, "../") || c == ".." {
			continue
		}
		if _, ok := b.files[c]; ok {
			return c, true
		}
	}
	if b.byBase == nil {
		b.byBase = map[string][]string{}
		for n := range b.files {
			if slices.Contains(bundleImageExts, strings.ToLower(path.Ext(n))) {
				k := strings.ToLower(path.Base(n))
				b.byBase[k] = append(b.byBase[k], n)
			}
		}
	}
	if ns := b.byBase[strings.ToLower(path.Base(target))]; len(ns) == 1 {
		return ns[0], true
	}
	b.warnings = append(b.warnings, fmt.Sprintf("image link %q does not match a file in the archive", target))
	return "", false
}
