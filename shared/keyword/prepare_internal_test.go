package keyword

import (
	"reflect"
	"testing"
)

// The memoizing preparer must give exactly what analysing each document with
// Terms gives (term vectors, lengths, encoded vectors), for both analyzers,
// with words that share a stem, stop words, CJK runs, folds and apostrophes,
// across many documents of one worker.
func TestPreparerMatchesTerms(t *testing.T) {
	docs := []Doc{
		{ID: "a", Text: "The cells and the Cell's cells: CELLING celled; don't stop, 1.5 10,000 naïve Æsir ﬁne"},
		{ID: "b", Text: "知识图谱 and 検索エンジン, 한국어 텍스트; running runs ran runner ＡＢＣ x² café"},
		{ID: "c", Text: ""},
		{ID: "d", Text: "it is the a an of to"},
		{ID: "e", Text: "cells cells cells connect connected connecting connection"},
	}
	if testing.Short() {
		t.Log("short: without the SciFact corpus")
	} else if f, err := openSciFact(); err == nil {
		f.Close()
		docs = append(docs, scifactDocs(t)[:500]...)
	}
	for _, lang := range []string{"auto", "simple"} {
		an := NewAnalyzer(lang)
		if _, ok := an.(wordAnalyzer); !ok {
			t.Fatalf("%s analyzer is not a wordAnalyzer: the test would compare the fallback with itself", lang)
		}
		p := newPreparer(an)
		for _, d := range docs {
			got, want := p.prepare(d), prepareDoc(an, d)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s, document %s: preparer gave %+v, Terms gave %+v", lang, d.ID, got, want)
			}
		}
		if got, want := prepareDocs(an, docs), prepareDocs(plainAnalyzer{an}, docs); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: prepareDocs differs from the per-document path", lang)
		}
	}
}

// plainAnalyzer hides the wordAnalyzer methods: prepareDocs takes the
// per-document path.
type plainAnalyzer struct{ an Analyzer }

func (p plainAnalyzer) Terms(text string) []string { return p.an.Terms(text) }
