package docparse_test

import (
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/docparse"
)

func TestNewOCREngines(t *testing.T) {
	t.Parallel()
	cases := []struct {
		engine, base, token string
		want                any
	}{
		{"mineru_ocr", "http://mineru-api:30001/", "", &docparse.MinerU{}},
		{"pp_structure_v3_ocr", "http://paddlex:8080", "", &docparse.PaddleX{}},
		{"paddleocr_vl_1_6", "", "tok", &docparse.PaddleOCRJobs{}},
		{"paddleocr_pp_ocrv6", "https://example.test/jobs", "tok", &docparse.PaddleOCRJobs{}},
	}
	for _, c := range cases {
		ocr, err := docparse.NewOCR(c.engine, c.base, c.token, nil)
		if err != nil {
			t.Errorf("NewOCR(%s): %v", c.engine, err)
			continue
		}
		switch o := ocr.(type) {
		case *docparse.MinerU:
			if o.BaseURL != "http://mineru-api:30001" || o.HTTP == nil {
				t.Errorf("MinerU = %+v", o)
			}
		case *docparse.PaddleX:
			if o.BaseURL != "http://paddlex:8080" {
				t.Errorf("PaddleX = %+v", o)
			}
		case *docparse.PaddleOCRJobs:
			if c.engine == "paddleocr_vl_1_6" && (o.URL != docparse.DefaultPaddleOCRJobsURL || o.Model != "PaddleOCR-VL-1.6") {
				t.Errorf("VL jobs = %+v", o)
			}
			if c.engine == "paddleocr_pp_ocrv6" && (o.URL != "https://example.test/jobs" || o.Model != "PP-OCRv6") {
				t.Errorf("PP-OCRv6 jobs = %+v", o)
			}
		default:
			t.Errorf("NewOCR(%s) = %T", c.engine, ocr)
		}
	}
}

func TestNewOCRErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		engine, base, token string
		mentions            []string
	}{
		{"tesseract", "", "", append([]string{`unknown ocr engine "tesseract"`}, docparse.KnownOCREngines()...)},
		{"mineru_ocr", "", "", []string{"MINERU_API_URI"}},
		{"pp_structure_v3_ocr", "", "", []string{"PADDLEX_URI"}},
		{"paddleocr_vl_1_6", "", "", []string{"PADDLEOCR_API_TOKEN"}},
		{"mineru_ocr", "ftp://host", "", []string{"not an http(s) URL"}},
		{"rapid_ocr", "http://x", "", []string{"not available", "mineru_ocr"}},
		{"deepseek_ocr", "http://x", "k", []string{"not available"}},
		{"mineru_official", "", "k", []string{"not available"}},
		{"disable", "", "", []string{"leave Options.OCR nil"}},
	}
	for _, c := range cases {
		ocr, err := docparse.NewOCR(c.engine, c.base, c.token, nil)
		if err == nil {
			t.Errorf("NewOCR(%q) = %T, want an error", c.engine, ocr)
			continue
		}
		for _, m := range c.mentions {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("NewOCR(%q) error %q does not mention %q", c.engine, err, m)
			}
		}
	}
}
