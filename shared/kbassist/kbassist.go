// Package kbassist is the model-made helpers of knowledge bases: sample
// questions (POST/GET …/databases/{kb_id}/sample-questions: questions a
// chat model writes from the knowledge base's file names and the start of
// each file's first chunk, stored in kb_sample_questions, migration 0085,
// owned here, and shown as query examples) and a description for a
// knowledge base (POST /api/knowledge/generate-description: written from
// its name, current description and file names, for agents choosing it as
// a tool). Both use the system's default chat model, as the original.
//
// Imported by: functions/intake, tests. May import: shared/access,
// shared/failure, shared/kb, shared/llm, pgx and the standard library.
package kbassist

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/llm"
)

// KBs checks access (kb.Store).
type KBs interface {
	Get(ctx context.Context, sub access.Subject, kbID string) (kb.KB, error)
	GetManaged(ctx context.Context, sub access.Subject, kbID string) (kb.KB, error)
}

// Files lists a knowledge base's files and the start of their content (kb.Store).
type Files interface {
	ListFiles(ctx context.Context, kbID string, in kb.ListInput) ([]kb.File, int, error)
	Excerpts(ctx context.Context, kbID string, fileIDs []string, maxChars int) (map[string]string, error)
}

// Models resolves chat models (llm.Registry, modelprovider.Store).
type Models interface {
	ChatModel(spec string) (llm.ChatModel, string, error)
	DefaultModel() string
}

// Service is the helpers' use cases.
type Service struct {
	Pool   *pgxpool.Pool
	KBs    KBs
	Files  Files
	Models Models
}

// MaxFiles is how many files a sample-question prompt lists (the
// original's 20), MaxQuestions how many questions one call may ask for.
const (
	MaxFiles     = 20
	MaxQuestions = 50
	excerptChars = 300
)

// Questions is a knowledge base's stored sample questions.
type Questions struct {
	KBID      string     `json:"kb_id"`
	Questions []string   `json:"questions"`
	Count     int        `json:"count"`
	Model     string     `json:"model,omitempty"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
}

const questionsPrompt = `You write test questions for a knowledge base's retrieval.
You are given the knowledge base's files: each file's name and type and the start of its text.
Write questions that the files can answer: specific, varied (facts, concepts, how-to), 10 to 30 words each,
in the language of the files. Answer with one JSON object only: {"questions": ["…", "…"]}.`

// GenerateQuestions asks the default model for count (default 10, at most
// MaxQuestions) questions about a knowledge base sub manages and stores
// them, replacing the previous ones. A knowledge base without files is
// refused (400, as the original); a reply that is not a list of questions
// is 422 and nothing is stored.
func (s *Service) GenerateQuestions(ctx context.Context, sub access.Subject, kbID string, count int) (Questions, error) {
	k, err := s.KBs.GetManaged(ctx, sub, kbID)
	if err != nil {
		return Questions{}, err
	}
	if count == 0 {
		count = 10
	}
	if count < 1 || count > MaxQuestions {
		return Questions{}, failure.Unprocessable("invalid_count", "count must be between 1 and %d", MaxQuestions)
	}
	files, total, err := s.Files.ListFiles(ctx, kbID, kb.ListInput{AllLevels: true, Limit: 200})
	if err != nil {
		return Questions{}, err
	}
	var pick []kb.File
	for _, f := range files {
		if !f.IsFolder && len(pick) < MaxFiles {
			pick = append(pick, f)
		}
	}
	if len(pick) == 0 {
		return Questions{}, failure.Invalid("knowledge_base_empty", "the knowledge base has no files to ask about")
	}
	ids := make([]string, len(pick))
	for i, f := range pick {
		ids[i] = f.FileID
	}
	excerpts, err := s.Files.Excerpts(ctx, kbID, ids, excerptChars)
	if err != nil {
		return Questions{}, err
	}
	var user strings.Builder
	fmt.Fprintf(&user, "Knowledge base: %s\n", k.Name)
	if k.Description != "" {
		fmt.Fprintf(&user, "Description: %s\n", k.Description)
	}
	if total > len(pick) {
		fmt.Fprintf(&user, "Files (the first %d of %d):\n", len(pick), total)
	} else {
		user.WriteString("Files:\n")
	}
	for _, f := range pick {
		fmt.Fprintf(&user, "- %s (%s)\n", f.Filename, f.FileType)
		if ex := strings.TrimSpace(excerpts[f.FileID]); ex != "" {
			fmt.Fprintf(&user, "  starts: %s\n", strings.Join(strings.Fields(ex), " "))
		}
	}
	fmt.Fprintf(&user, "Write %d questions.\n", count)
	spec, reply, err := s.ask(ctx, questionsPrompt, user.String())
	if err != nil {
		return Questions{}, err
	}
	qs, err := parseQuestions(reply)
	if err != nil {
		return Questions{}, err
	}
	if len(qs) > count {
		qs = qs[:count]
	}
	b, _ := json.Marshal(qs)
	if _, err := s.Pool.Exec(ctx, `INSERT INTO kb_sample_questions (kb_id, questions, model) VALUES ($1, $2, $3)
		ON CONFLICT (kb_id) DO UPDATE SET questions = $2, model = $3, updated_at = now()`, kbID, b, spec); err != nil {
		return Questions{}, fmt.Errorf("save sample questions: %w", err)
	}
	return s.load(ctx, kbID)
}

// GetQuestions returns the stored questions of a knowledge base sub reads
// (an empty list before any generation).
func (s *Service) GetQuestions(ctx context.Context, sub access.Subject, kbID string) (Questions, error) {
	if _, err := s.KBs.Get(ctx, sub, kbID); err != nil {
		return Questions{}, err
	}
	return s.load(ctx, kbID)
}

func (s *Service) load(ctx context.Context, kbID string) (Questions, error) {
	q := Questions{KBID: kbID, Questions: []string{}}
	var raw []byte
	var at time.Time
	err := s.Pool.QueryRow(ctx, `SELECT questions, model, updated_at FROM kb_sample_questions WHERE kb_id = $1`, kbID).
		Scan(&raw, &q.Model, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return q, nil
	}
	if err != nil {
		return q, fmt.Errorf("load sample questions: %w", err)
	}
	if err := json.Unmarshal(raw, &q.Questions); err != nil {
		return q, fmt.Errorf("stored sample questions: %w", err)
	}
	q.Count, q.UpdatedAt = len(q.Questions), &at
	return q, nil
}

// parseQuestions reads {"questions": [...]} from a reply, possibly in a
// code fence or prose; blank entries are dropped.
func parseQuestions(reply string) ([]string, error) {
	s := strings.TrimSpace(reply)
	i, j := strings.Index(s, "{"), strings.LastIndex(s, "}")
	var v struct {
		Questions []string `json:"questions"`
	}
	if i < 0 || j <= i || json.Unmarshal([]byte(s[i:j+1]), &v) != nil {
		return nil, failure.Unprocessable("invalid_model_reply", "the model did not return {\"questions\": [...]}")
	}
	var out []string
	for _, q := range v.Questions {
		if q = strings.TrimSpace(q); q != "" {
			out = append(out, q)
		}
	}
	if len(out) == 0 {
		return nil, failure.Unprocessable("invalid_model_reply", "the model returned no questions")
	}
	return out, nil
}

// ask sends one system and one user message to the default model and
// returns the model spec used and the reply.
func (s *Service) ask(ctx context.Context, system, user string) (string, string, error) {
	spec := s.Models.DefaultModel()
	if spec == "" {
		return "", "", failure.Unprocessable("no_default_model", "no default model is configured")
	}
	model, modelID, err := s.Models.ChatModel(spec)
	if err != nil {
		return "", "", err
	}
	resp, err := llm.Ask(ctx, model, modelID, system, user)
	if err != nil {
		return "", "", failure.Unprocessable("model_failed", "model %s: %v", spec, err)
	}
	return spec, resp.Content, nil
}

// DescriptionInput is POST /api/knowledge/generate-description's body.
type DescriptionInput struct {
	Name               string   `json:"name"`
	CurrentDescription string   `json:"current_description"`
	FileList           []string `json:"file_list"`
}

const descriptionPrompt = `You write the description of a knowledge base. Agents read it to decide whether to search this
knowledge base, so say clearly and concretely what it contains and which questions it answers.
Two to four sentences, plain text without Markdown, no preface: answer with the description only.`

// maxDescribedFiles is how many file names the prompt lists (the original's 50).
const maxDescribedFiles = 50

// GenerateDescription writes (or improves) a knowledge base description
// from its name, current description and file names with the default model.
func (s *Service) GenerateDescription(ctx context.Context, in DescriptionInput) (string, error) {
	name := strings.TrimSpace(in.Name)
	if name == "" {
		return "", failure.Unprocessable("missing_name", "name is required")
	}
	if len(name) > 200 || len(in.CurrentDescription) > 4000 {
		return "", failure.Unprocessable("input_too_long", "name is limited to 200 bytes, current_description to 4000")
	}
	if len(in.FileList) > 10000 {
		return "", failure.Unprocessable("input_too_long", "file_list is limited to 10000 names")
	}
	var user strings.Builder
	fmt.Fprintf(&user, "Knowledge base name: %s\n", name)
	cur := strings.TrimSpace(in.CurrentDescription)
	if cur == "" {
		cur = "(none)"
	}
	fmt.Fprintf(&user, "Current description: %s\n", cur)
	if len(in.FileList) > 0 {
		user.WriteString("Files of the knowledge base (describe what they cover):\n")
		for i, f := range in.FileList {
			if i == maxDescribedFiles {
				fmt.Fprintf(&user, "… and %d more files\n", len(in.FileList)-maxDescribedFiles)
				break
			}
			fmt.Fprintf(&user, "- %s\n", strings.TrimSpace(f))
		}
	}
	_, reply, err := s.ask(ctx, descriptionPrompt, user.String())
	if err != nil {
		return "", err
	}
	d := strings.TrimSpace(reply)
	if d == "" {
		return "", failure.Unprocessable("invalid_model_reply", "the model returned an empty description")
	}
	return d, nil
}
