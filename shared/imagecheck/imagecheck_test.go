package imagecheck_test

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/png"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/imagecheck"
	"github.com/yuxi-serverless/yuxi/shared/imagecheck/imagechecktest"
)

func TestWebPIsCheckedByContent(t *testing.T) {
	t.Parallel()
	webp := imagechecktest.SolidWebP(7, 5, color.NRGBA{R: 200, G: 30, B: 60, A: 255})
	k, err := imagecheck.Verify(webp, 1000)
	if err != nil || k.Format != "webp" || k.Ext != "webp" || k.ContentType != "image/webp" {
		t.Fatalf("verify a real WebP: %+v, %v", k, err)
	}
	// It decodes to what was written: the colour, the size.
	img, format, err := image.Decode(bytes.NewReader(webp))
	if err != nil || format != "webp" || img.Bounds().Dx() != 7 || img.Bounds().Dy() != 5 {
		t.Fatalf("decode: %v %s %v", img, format, err)
	}
	if r, g, b, _ := img.At(3, 2).RGBA(); r>>8 != 200 || g>>8 != 30 || b>>8 != 60 {
		t.Fatalf("pixel = %d %d %d", r>>8, g>>8, b>>8)
	}
	if _, _, err := imagecheck.Check(webp, 34); !errors.Is(err, imagecheck.ErrTooManyPixels) {
		t.Fatalf("35 pixels over a bound of 34: %v", err)
	}
	// A RIFF/WEBP header around something else, a truncated file, an SVG.
	forged := append(append([]byte{}, webp[:12]...), []byte("VP8L\x10\x00\x00\x00<svg onload=x>  ")...)
	truncated := webp[:len(webp)-4]
	for name, data := range map[string][]byte{"forged": forged, "truncated": truncated} {
		if _, err := imagecheck.Verify(data, 1000); !errors.Is(err, imagecheck.ErrBadImage) {
			t.Errorf("%s WebP: %v, want ErrBadImage", name, err)
		}
	}
	if _, err := imagecheck.Verify([]byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`), 1000); !errors.Is(err, imagecheck.ErrNotAnImage) {
		t.Errorf("svg: %v", err)
	}
	// The other accepted types still pass.
	var p bytes.Buffer
	_ = png.Encode(&p, image.NewNRGBA(image.Rect(0, 0, 2, 2)))
	if k, err := imagecheck.Verify(p.Bytes(), 1000); err != nil || k.Format != "png" {
		t.Errorf("png: %+v %v", k, err)
	}
}
