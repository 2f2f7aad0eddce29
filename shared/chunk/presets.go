package chunk

import "strings"

// Preset ids, as stored in chunk_preset_id.
const (
	PresetGeneral   = "general"
	PresetQA        = "qa"
	PresetBook      = "book"
	PresetLaws      = "laws"
	PresetSemantic  = "semantic"
	PresetSeparator = "separator"
)

// Preset describes a chunk preset for GET /api/knowledge/chunk-presets, which
// lists them as [{value: ID, label: Label, description: Description}].
type Preset struct {
	ID          string
	Label       string
	Description string
}

// Presets lists the presets in the original's order (general first: the
// default). Descriptions are the original's Chinese text followed by English.
func Presets() []Preset {
	return []Preset{
		{ID: PresetGeneral, Label: "General",
			Description: "通用分块：按分隔符和长度切分，适合大多数普通文档。 General: splits by delimiter and length; suits most documents."},
		{ID: PresetQA, Label: "QA",
			Description: "问答分块：优先抽取问题-回答结构，适合 FAQ、题库、问答手册。 Q&A: extracts question–answer pairs; suits FAQs, question banks and Q&A manuals."},
		{ID: PresetBook, Label: "Book",
			Description: "书籍分块：强化章节标题识别并做层级合并，适合教材、手册、长章节文档。 Book: recognises chapter headings and merges by hierarchy; suits textbooks, manuals and long chaptered documents."},
		{ID: PresetLaws, Label: "Laws",
			Description: "法规分块：按法条层级组织与合并，适合法律法规、制度规范类文本。 Laws: organises and merges by the chapter/section/article hierarchy; suits laws, regulations and policies."},
		{ID: PresetSemantic, Label: "Semantic",
			Description: "语义分块：利用嵌入和聚类算法进行语义切分，并自动增强标题上下文。 Semantic: follows the Markdown structure, splits long text by embedding similarity and prefixes each chunk with its heading path."},
		{ID: PresetSeparator, Label: "Separator",
			Description: "严格分隔：命中分隔符即切分，仅超长片段内部继续按长度切分。 Separator: every delimiter starts a new chunk; only over-long pieces are cut further by length."},
	}
}

// ResolvePreset normalises a chunk_preset_id: trimmed and lower-cased; the
// original's internal id "naive", "" and unknown ids are general.
func ResolvePreset(id string) string {
	switch n := strings.ToLower(strings.TrimSpace(id)); n {
	case PresetGeneral, PresetQA, PresetBook, PresetLaws, PresetSemantic, PresetSeparator:
		return n
	default:
		return PresetGeneral
	}
}
