package run_test

import (
	"encoding/json"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/queue"
)

func queueResume(sub access.Subject, threadID, runID, answer string) queue.ResumeInput {
	return queue.ResumeInput{Subject: sub, AgentSlug: "default-chatbot", ThreadID: threadID, Resume: json.RawMessage(answer), CreatedByRunID: runID}
}
