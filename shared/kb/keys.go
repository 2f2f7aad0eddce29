package kb

import (
	"fmt"
	"net/url"
	"path"
	"strings"
	"time"
	"unicode/utf8"
)

// The object-store layout of a KB, defined here once. Every key of a KB
// starts with its ObjectPrefix, so that deleting the KB can purge its
// objects by prefix:
//
//	kb/<kb_id>/upload/<unix nanos>-<file name>      an uploaded original (UploadKey)
//	kb/<kb_id>/files/<file_id>/content.md           parsed Markdown (MarkdownKey)
//	kb/<kb_id>/files/<file_id>/content-<nanos>.md   edited Markdown (EditedMarkdownKey)
//	kb/<kb_id>/files/<file_id>/images/<nnn>-<name>  an extracted image (ImageKey)
//
// Files from a bound bucket keep their source URI (SourceURI) as object key
// and are read from that bucket.

// ObjectPrefix is where a KB's objects live in the object store: uploads,
// parsed Markdown and images.
func ObjectPrefix(kbID string) string { return "kb/" + kbID + "/" }

// uploadPrefix is where a KB's uploaded originals live.
func uploadPrefix(kbID string) string { return ObjectPrefix(kbID) + "upload/" }

// UploadKey is the key of an original uploaded to kbID at time at; the
// time keeps two uploads of one name apart.
func UploadKey(kbID, name string, at time.Time) string {
	return fmt.Sprintf("%s%d-%s", uploadPrefix(kbID), at.UnixNano(), name)
}

// IsUploadKey reports whether key names an original uploaded to kbID.
// Only keys UploadKey can make qualify: one segment under the upload
// prefix, valid UTF-8, no NUL, no "." or ".." (so "…/upload/../x" or
// "…/upload//x" never reach the object store).
func IsUploadKey(kbID, key string) bool {
	name, ok := strings.CutPrefix(key, uploadPrefix(kbID))
	return ok && name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00") &&
		utf8.ValidString(name) && utf8.ValidString(kbID) && !strings.ContainsAny(kbID, "/\x00")
}

// UploadName is the file name an UploadKey was made from.
func UploadName(key string) string {
	name := path.Base(key)
	if i := strings.Index(name, "-"); i >= 0 {
		name = name[i+1:]
	}
	return name
}

// fileObjectPrefix is where the objects derived from one file live.
func fileObjectPrefix(kbID, fileID string) string {
	return ObjectPrefix(kbID) + "files/" + fileID + "/"
}

// MarkdownKey is the key of a file's parsed Markdown. Every parse of the file
// writes it again.
func MarkdownKey(kbID, fileID string) string { return fileObjectPrefix(kbID, fileID) + "content.md" }

// EditedMarkdownKey is the key of Markdown edited at time at: a key of its
// own, so that the current Markdown stays intact until the edit commits.
func EditedMarkdownKey(kbID, fileID string, at time.Time) string {
	return fmt.Sprintf("%scontent-%d.md", fileObjectPrefix(kbID, fileID), at.UnixNano())
}

// ImageKey is the key of the n-th (from 1) image extracted from a file.
func ImageKey(kbID, fileID string, n int, name string) string {
	return fmt.Sprintf("%simages/%03d-%s", fileObjectPrefix(kbID, fileID), n, name)
}

// IsObjectKey reports whether key is a plain key of kbID's objects (no
// "..": it cannot name another KB's objects through the image route).
func IsObjectKey(kbID, key string) bool {
	return strings.HasPrefix(key, ObjectPrefix(kbID)) && !strings.Contains(key, "..")
}

// ImageURL is the link to an extracted image that parsed Markdown carries:
// intake's GET /api/knowledge/databases/{kb_id}/images/{object_path...},
// which serves it to whoever may read the KB (images are never public).
func ImageURL(kbID, key string) string {
	parts := strings.Split(key, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return "/api/knowledge/databases/" + kbID + "/images/" + strings.Join(parts, "/")
}

// GraphCollection is the vector collection of a KB's graph: its entities'
// and triples' vectors (shared/graph's vector index); a KB's purge drops it
// with the chunks' collection (named kbID).
func GraphCollection(kbID string) string { return kbID + "__graph" }
