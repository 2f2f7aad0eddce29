// Package imagecheck tells an uploaded image's type from its content: the
// magic bytes of PNG, JPEG, GIF or WebP (the types the original accepts for
// avatars, user images and chat images), then the format's own decoder,
// so that a file which only starts like an image — an SVG or HTML page
// behind a forged header, a truncated file — is refused. A file name or a
// client's MIME type is never consulted.
//
// Imported by: shared/chatimage, shared/usersettings, tests.
// May import: the standard library, golang.org/x/image/webp.
package imagecheck

import (
	"bytes"
	"errors"
	"image"
	_ "image/gif" // decoders registered for image.Decode / DecodeConfig
	_ "image/jpeg"
	_ "image/png"

	_ "golang.org/x/image/webp"
)

// Kind is an accepted image type.
type Kind struct {
	Format      string // as image.DecodeConfig names it: png | jpeg | gif | webp
	Ext         string // the file extension stored objects get (no dot)
	ContentType string
}

var kinds = []struct {
	Kind
	match func([]byte) bool
}{
	{Kind{"png", "png", "image/png"}, func(b []byte) bool { return bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) }},
	{Kind{"jpeg", "jpg", "image/jpeg"}, func(b []byte) bool { return bytes.HasPrefix(b, []byte{0xFF, 0xD8, 0xFF}) }},
	{Kind{"gif", "gif", "image/gif"}, func(b []byte) bool {
		return bytes.HasPrefix(b, []byte("GIF87a")) || bytes.HasPrefix(b, []byte("GIF89a"))
	}},
	{Kind{"webp", "webp", "image/webp"}, func(b []byte) bool {
		return len(b) >= 12 && bytes.Equal(b[:4], []byte("RIFF")) && bytes.Equal(b[8:12], []byte("WEBP"))
	}},
}

// Errors of Check and Verify.
var (
	ErrNotAnImage    = errors.New("not a PNG, JPEG, GIF or WebP image")
	ErrBadImage      = errors.New("the image could not be decoded")
	ErrTooManyPixels = errors.New("the image has too many pixels")
)

// Check identifies data by its magic bytes and decodes its header with
// that format's decoder: the dimensions must be positive and at most
// maxPixels in all. It returns ErrNotAnImage (no accepted magic),
// ErrBadImage (the header does not decode as the format its magic claims)
// or ErrTooManyPixels.
func Check(data []byte, maxPixels int64) (Kind, image.Config, error) {
	for _, k := range kinds {
		if !k.match(data) {
			continue
		}
		cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
		if err != nil || format != k.Format {
			return Kind{}, image.Config{}, ErrBadImage
		}
		if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > maxPixels {
			return Kind{}, image.Config{}, ErrTooManyPixels
		}
		return k.Kind, cfg, nil
	}
	return Kind{}, image.Config{}, ErrNotAnImage
}

// Verify is Check followed by a full decode of the image (images stored
// and served as uploaded: every byte the browser will read is an image's).
func Verify(data []byte, maxPixels int64) (Kind, error) {
	k, _, err := Check(data, maxPixels)
	if err != nil {
		return Kind{}, err
	}
	if _, _, err := image.Decode(bytes.NewReader(data)); err != nil {
		return Kind{}, ErrBadImage
	}
	return k, nil
}
