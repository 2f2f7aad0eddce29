package evaluation

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/llm"
)

// Models builds chat models from "provider:model" specs (llm.Registry).
type Models interface {
	ChatModel(spec string) (llm.ChatModel, string, error)
}

// answerPrompt is the original's answer prompt over the top five chunks.
const answerPrompt = "基于以下上下文信息，回答用户的问题。如果上下文中没有足够的信息，请回答“信息不足，无法回答”。\n\n上下文信息：\n%s\n\n问题：%s\n\n回答："

// judgePrompt asks for strict JSON {"score": 1.0|0.0, "reasoning"}.
const judgePrompt = `你是一个严格的评估员。请判断“生成答案”是否正确回答了“问题”，并与“标准答案”在事实上一致。

问题：%s

标准答案：%s

生成答案：%s

只输出一个 JSON 对象，不要输出其他内容：{"score": 1.0 或 0.0, "reasoning": "简要理由"}`

// Judgement is one item's answer score.
type Judgement struct {
	Score     float64 `json:"score"`
	Reasoning string  `json:"reasoning"`
}

// complete runs one non-streamed turn and returns its text.
func complete(ctx context.Context, m llm.ChatModel, prompt string) (string, error) {
	resp, err := m.Stream(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: prompt}}}, func(llm.Delta) error { return nil })
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(resp.Content), nil
}

// generateAnswer asks the answer model over the first five chunks.
func generateAnswer(ctx context.Context, m llm.ChatModel, query string, contents []string) (string, error) {
	var b strings.Builder
	for i, c := range head(contents, 5) {
		fmt.Fprintf(&b, "[%d] %s\n\n", i+1, c)
	}
	return complete(ctx, m, fmt.Sprintf(answerPrompt, strings.TrimSpace(b.String()), query))
}

// judge scores answer against gold. An empty answer scores 0 ("未生成答案")
// without a model call; a model or parse error scores 0 with the error as
// the reasoning — as the original.
func judge(ctx context.Context, m llm.ChatModel, query, gold, answer string) Judgement {
	if strings.TrimSpace(answer) == "" {
		return Judgement{Score: 0, Reasoning: "未生成答案"}
	}
	out, err := complete(ctx, m, fmt.Sprintf(judgePrompt, query, gold, answer))
	if err != nil {
		return Judgement{Score: 0, Reasoning: "judge error: " + err.Error()}
	}
	j, err := ParseJudgement(out)
	if err != nil {
		return Judgement{Score: 0, Reasoning: "judge error: " + err.Error()}
	}
	return j
}

var fence = regexp.MustCompile("(?s)^```[a-zA-Z]*\\s*(.*?)\\s*```$")

// ParseJudgement reads the judge's reply: a JSON object, possibly inside a
// ```json fence or surrounded by prose (the first {…} is taken); score must
// be a number (or a numeric string) and is clamped to [0, 1].
func ParseJudgement(text string) (Judgement, error) {
	s := strings.TrimSpace(text)
	if m := fence.FindStringSubmatch(s); m != nil {
		s = m[1]
	}
	if i, j := strings.Index(s, "{"), strings.LastIndex(s, "}"); i >= 0 && j > i {
		s = s[i : j+1]
	}
	var raw struct {
		Score     json.RawMessage `json:"score"`
		Reasoning string          `json:"reasoning"`
	}
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return Judgement{}, fmt.Errorf("judge reply is not JSON: %w", err)
	}
	v := strings.Trim(strings.TrimSpace(string(raw.Score)), `"`)
	score, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return Judgement{}, fmt.Errorf("judge reply has no numeric score: %q", raw.Score)
	}
	score = min(max(score, 0), 1)
	return Judgement{Score: score, Reasoning: raw.Reasoning}, nil
}
