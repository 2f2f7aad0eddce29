// Package chatimage takes images into chat messages (POST
// /api/chat/image/upload): it checks the upload (PNG, JPEG, GIF or WebP by
// content, shared/imagecheck; size),
// normalises it as the original's image processor does (transparency
// composited on white, the longest side at most MaxSide, re-encoded as
// JPEG, a thumbnail), stores the result in the object store and records it
// in chat_images (owned here). A run that names the image by image_id
// references it from its user message; images no message ever referenced
// are deleted after a grace period by Sweep.
//
// Imported by: functions/intake, shared/bootstrap/identity, shared/bootstrap/knowledge. May import: shared/blob,
// shared/failure, shared/imagecheck, shared/postgres, pgx and the standard library.
package chatimage

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"io"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/imagecheck" // also registers the decoders image.Decode uses
)

const (
	// MaxUploadBytes bounds an uploaded image, as the original (10 MB).
	MaxUploadBytes = 10 << 20
	// MaxSide is the longest side of a stored image, in pixels.
	MaxSide = 2048
	// ThumbSide is the longest side of the thumbnail.
	ThumbSide = 200
	// MaxPixels refuses images whose decoded size would be a memory bomb.
	MaxPixels = 40_000_000
	// KeyPrefix starts every stored chat image's object key.
	KeyPrefix   = "chat-images/"
	jpegQuality = 85
)

// Errors of an upload.
var (
	ErrNotAnImage = failure.New(failure.KindUnsupportedMedia, "unsupported_image", "only PNG, JPEG, GIF and WebP images are accepted")
	ErrTooLarge   = failure.New(failure.KindTooLarge, "image_too_large", "images are at most %d bytes", MaxUploadBytes)
	ErrBadImage   = failure.Invalid("invalid_image", "the image could not be decoded")

	errTooManyPixels = failure.Unprocessable("image_dimensions", "images are at most %d pixels", MaxPixels)
	// ErrNotFound answers unknown image ids and another user's.
	ErrNotFound = failure.NotFound("image_not_found", "image not found")
	// ErrAlreadyUsed answers an image a message already references.
	ErrAlreadyUsed = failure.Conflict("image_already_used", "the image is already attached to a message")
)

// Uploaded is the answer of the upload route (the original's
// ImageUploadResponse, plus the stored image's id).
type Uploaded struct {
	Success          bool   `json:"success"`
	ImageID          string `json:"image_id"`
	ImageContent     string `json:"image_content"`     // base64 JPEG
	ThumbnailContent string `json:"thumbnail_content"` // base64 JPEG
	Width            int    `json:"width"`
	Height           int    `json:"height"`
	Format           string `json:"format"` // of the upload: png | jpeg | gif | webp
	MimeType         string `json:"mime_type"`
	SizeBytes        int    `json:"size_bytes"` // of the stored image
	OriginalFilename string `json:"original_filename,omitempty"`
}

// Store stores and finds chat images.
type Store struct {
	pool    *pgxpool.Pool
	objects blob.Store
}

// New returns the store.
func New(pool *pgxpool.Pool, objects blob.Store) *Store { return &Store{pool: pool, objects: objects} }

// Upload checks, normalises and stores uid's image read from r.
func (s *Store) Upload(ctx context.Context, uid, filename string, r io.Reader) (Uploaded, error) {
	if s.objects == nil {
		return Uploaded{}, failure.New(failure.KindUnavailable, "uploads_unavailable", "no object store is configured")
	}
	data, err := io.ReadAll(io.LimitReader(r, MaxUploadBytes+1))
	if err != nil {
		return Uploaded{}, err
	}
	if len(data) > MaxUploadBytes {
		return Uploaded{}, ErrTooLarge
	}
	kind, _, err := imagecheck.Check(data, MaxPixels)
	switch {
	case errors.Is(err, imagecheck.ErrNotAnImage):
		return Uploaded{}, ErrNotAnImage
	case errors.Is(err, imagecheck.ErrTooManyPixels):
		return Uploaded{}, errTooManyPixels
	case err != nil:
		return Uploaded{}, ErrBadImage
	}
	format := kind.Format
	full, thumb, w, h, err := Process(data)
	if err != nil {
		return Uploaded{}, err
	}
	id := newID()
	key := KeyPrefix + id + ".jpg"
	if _, err := s.objects.Put(ctx, key, bytes.NewReader(full), int64(len(full)), "image/jpeg"); err != nil {
		return Uploaded{}, fmt.Errorf("store image: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO chat_images (image_id, uid, object_key, mime_type, size_bytes, width, height)
		VALUES ($1, $2, $3, 'image/jpeg', $4, $5, $6)`, id, uid, key, len(full), w, h); err != nil {
		_ = s.objects.Delete(context.WithoutCancel(ctx), key)
		return Uploaded{}, fmt.Errorf("record image: %w", err)
	}
	return Uploaded{Success: true, ImageID: id, ImageContent: base64.StdEncoding.EncodeToString(full),
		ThumbnailContent: base64.StdEncoding.EncodeToString(thumb), Width: w, Height: h, Format: format,
		MimeType: "image/jpeg", SizeBytes: len(full), OriginalFilename: filename}, nil
}

// Process decodes an image, composites it on white, scales it so its
// longest side is at most MaxSide, and encodes it and a thumbnail as JPEG.
func Process(data []byte) (full, thumb []byte, w, h int, err error) {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, nil, 0, 0, ErrBadImage
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > MaxPixels {
		return nil, nil, 0, 0, errTooManyPixels
	}
	src, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, nil, 0, 0, ErrBadImage
	}
	b := src.Bounds()
	flat := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(flat, flat.Bounds(), &image.Uniform{C: color.White}, image.Point{}, draw.Src)
	draw.Draw(flat, flat.Bounds(), src, b.Min, draw.Over)
	big := scale(flat, MaxSide)
	small := scale(big, ThumbSide)
	var fb, tb bytes.Buffer
	if err := jpeg.Encode(&fb, big, &jpeg.Options{Quality: jpegQuality}); err != nil {
		return nil, nil, 0, 0, err
	}
	if err := jpeg.Encode(&tb, small, &jpeg.Options{Quality: jpegQuality}); err != nil {
		return nil, nil, 0, 0, err
	}
	return fb.Bytes(), tb.Bytes(), big.Bounds().Dx(), big.Bounds().Dy(), nil
}

// scale shrinks img (never enlarges) so that its longest side is at most
// side, averaging the source pixels each target pixel covers.
func scale(img *image.RGBA, side int) *image.RGBA {
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	if w <= side && h <= side {
		return img
	}
	nw, nh := side, h*side/w
	if h > w {
		nw, nh = w*side/h, side
	}
	nw, nh = max(nw, 1), max(nh, 1)
	out := image.NewRGBA(image.Rect(0, 0, nw, nh))
	for y := 0; y < nh; y++ {
		y0, y1 := y*h/nh, max((y+1)*h/nh, y*h/nh+1)
		for x := 0; x < nw; x++ {
			x0, x1 := x*w/nw, max((x+1)*w/nw, x*w/nw+1)
			var r, g, bl, a, n uint64
			for sy := y0; sy < y1; sy++ {
				row := img.Pix[sy*img.Stride:]
				for sx := x0; sx < x1; sx++ {
					p := row[sx*4 : sx*4+4]
					r, g, bl, a, n = r+uint64(p[0]), g+uint64(p[1]), bl+uint64(p[2]), a+uint64(p[3]), n+1
				}
			}
			o := out.Pix[y*out.Stride+x*4:]
			o[0], o[1], o[2], o[3] = uint8(r/n), uint8(g/n), uint8(bl/n), uint8(a/n)
		}
	}
	return out
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var idPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// Content returns uid's image as base64 JPEG, for a message that references
// it; ErrNotFound for unknown ids and other users' images, ErrAlreadyUsed
// when a message already references it.
func (s *Store) Content(ctx context.Context, uid, imageID string) (string, error) {
	if !idPattern.MatchString(imageID) {
		return "", ErrNotFound
	}
	var key string
	var msg *int64
	err := s.pool.QueryRow(ctx, `SELECT object_key, message_id FROM chat_images WHERE image_id = $1 AND uid = $2`, imageID, uid).Scan(&key, &msg)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("load image: %w", err)
	}
	if msg != nil {
		return "", ErrAlreadyUsed
	}
	rc, _, err := s.objects.Get(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, MaxUploadBytes+1))
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(data), nil
}

// Bind records that messageID references uid's image; an image is bound
// once (a concurrent second bind gets ErrAlreadyUsed).
func (s *Store) Bind(ctx context.Context, uid, imageID string, messageID int64) error {
	tag, err := s.pool.Exec(ctx, `UPDATE chat_images SET message_id = $3 WHERE image_id = $1 AND uid = $2 AND message_id IS NULL`,
		imageID, uid, messageID)
	if err != nil {
		return fmt.Errorf("bind image: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrAlreadyUsed
	}
	return nil
}

// Sweep deletes the images no message referenced within grace of their
// upload: the row first (only while still unreferenced, so a bind racing the
// sweep wins or loses atomically), then the object. Objects under KeyPrefix
// older than grace without a row (a crash between the two deletes, or an
// upload whose row insert failed) are deleted too. It returns how many
// objects it removed.
func (s *Store) Sweep(ctx context.Context, grace time.Duration, now time.Time) (int, error) {
	cutoff := now.Add(-grace)
	rows, err := s.pool.Query(ctx, `DELETE FROM chat_images WHERE image_id IN (
			SELECT image_id FROM chat_images WHERE message_id IS NULL AND created_at < $1 ORDER BY created_at LIMIT 1000)
		AND message_id IS NULL RETURNING object_key`, cutoff)
	if err != nil {
		return 0, fmt.Errorf("delete unreferenced images: %w", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range keys {
		if err := s.objects.Delete(ctx, k); err != nil {
			return n, fmt.Errorf("delete image object %s: %w", k, err)
		}
		n++
	}
	objs, err := s.objects.List(ctx, KeyPrefix)
	if err != nil {
		return n, fmt.Errorf("list image objects: %w", err)
	}
	for _, o := range objs {
		if o.ModTime.IsZero() || !o.ModTime.Before(cutoff) {
			continue
		}
		var exists bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM chat_images WHERE object_key = $1)`, o.Key).Scan(&exists); err != nil {
			return n, err
		}
		if !exists {
			if err := s.objects.Delete(ctx, o.Key); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}
