// Package kbspec is the contract of the agent's knowledge-base tools as the
// model sees it: names, descriptions and JSON argument schemas. kbtool
// implements these tools; a process that only offers them to the model
// (agent-step) takes the specs from here without linking the knowledge engines.
//
// Imported by: shared/kbtool, function wiring. May import: shared/tool and the
// standard library.
package kbspec

import (
	"encoding/json"

	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// All returns the six knowledge tools' specs.
func All() []tool.Spec {
	return []tool.Spec{ListKBs(), GetMindmap(), QueryKB(), OpenDocument(), FindDocument(), SearchFile(), DownloadFile()}
}

// GetMindmap is get_mindmap (the knowledge base by name, as the original).
func GetMindmap() tool.Spec {
	return spec("get_mindmap", "Get a knowledge base's mind map",
		"Return the mind map of knowledge base kb_name (its files organised by topic) as an indented tree, to see what it covers before searching.",
		`{"type":"object","additionalProperties":false,"required":["kb_name"],"properties":{"kb_name":{"type":"string","minLength":1}}}`)
}

func spec(name, display, desc, params string) tool.Spec {
	return tool.Spec{Name: name, DisplayName: display, Category: "knowledge", Tags: []string{"knowledge"}, Description: desc,
		Parameters: json.RawMessage(params)}
}

// ListKBs is list_kbs.
func ListKBs() tool.Spec {
	return spec("list_kbs", "List knowledge bases", "List the knowledge bases available in this conversation (kb_id, name, description).",
		`{"type":"object","additionalProperties":false,"properties":{"dummy":{"type":"string","description":"ignored"}}}`)
}

// QueryKB is query_kb.
func QueryKB() tool.Spec {
	return spec("query_kb", "Search a knowledge base",
		"Search knowledge base kb_id for passages relevant to query_text; optionally only in files whose name contains file_name. Cite kb_id, file_id and the chunk id (id) of passages you use.",
		`{"type":"object","additionalProperties":false,"required":["kb_id","query_text"],"properties":{
			"kb_id":{"type":"string"},"query_text":{"type":"string","minLength":1},"file_name":{"type":"string"}}}`)
}

// OpenDocument is open_kb_document.
func OpenDocument() tool.Spec {
	return spec("open_kb_document", "Open a document",
		"Open the parsed text of file_id in kb_id, window_size lines (default 1800) from offset (0-based) or from line (1-based; wins over offset). Lines are numbered.",
		`{"type":"object","additionalProperties":false,"required":["kb_id","file_id"],"properties":{
			"kb_id":{"type":"string"},"file_id":{"type":"string"},"line":{"type":"integer","minimum":1},
			"offset":{"type":"integer","minimum":0},"window_size":{"type":"integer","minimum":1,"maximum":2000,"default":1800}}}`)
}

// FindDocument is find_kb_document.
func FindDocument() tool.Spec {
	return spec("find_kb_document", "Find in a document",
		"Find lines of file_id in kb_id matching any of patterns (keywords, or regular expressions with use_regex); returns up to max_windows windows of window_size numbered lines around the matches.",
		`{"type":"object","additionalProperties":false,"required":["kb_id","file_id","patterns"],"properties":{
			"kb_id":{"type":"string"},"file_id":{"type":"string"},
			"patterns":{"type":"array","minItems":1,"items":{"type":"string","minLength":1}},
			"use_regex":{"type":"boolean","default":false},"case_sensitive":{"type":"boolean","default":false},
			"max_windows":{"type":"integer","minimum":1,"maximum":20,"default":5},
			"window_size":{"type":"integer","minimum":1,"maximum":200,"default":80}}}`)
}

// SearchFile is search_file.
func SearchFile() tool.Spec {
	return spec("search_file", "Search files",
		"Search files by name across the knowledge bases of this conversation, or one (kb_name). Give kb_name, query or both.",
		`{"type":"object","additionalProperties":false,"properties":{
			"kb_name":{"type":"string"},"query":{"type":"string"},
			"offset":{"type":"integer","minimum":0,"default":0},"limit":{"type":"integer","minimum":1,"maximum":5000,"default":300}}}`)
}

// DownloadFile is download_kb_file.
func DownloadFile() tool.Spec {
	return spec("download_kb_file", "Download a knowledge-base file",
		"Copy the original file (pdf, docx, xlsx, …) of file_id from a knowledge base of this conversation into /home/gem/user-data/outputs/ "+
			"and return its sandbox path, to open it from code (openpyxl.load_workbook, pdfplumber.open, …) or parse it with ocr_parse_file. "+
			"save_as names the copy (directories are stripped; a taken name gets a _N suffix). The file is not parsed and not presented.",
		`{"type":"object","additionalProperties":false,"required":["file_id"],"properties":{
			"file_id":{"type":"string"},"save_as":{"type":"string","description":"file name of the copy in outputs/"}}}`)
}
