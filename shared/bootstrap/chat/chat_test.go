package chat_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/bootstrap/chat"
	"github.com/yuxi-serverless/yuxi/shared/kbtool"
	"github.com/yuxi-serverless/yuxi/shared/kbtool/kbspec"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// agent-step offers the model kbspec.All (without linking the knowledge
// engines) and tool-invoke runs kbtool.Tools: both must be the same tools, or
// the model is offered a tool nobody runs, or never offered one that exists.
func TestOfferedKnowledgeToolsAreTheOnesToolInvokeRuns(t *testing.T) {
	offered := tool.NewRegistry(chat.Offered(kbspec.All()...)...).Specs()
	run := tool.NewRegistry(kbtool.Tools(kbtool.Deps{})...).Specs()
	if !reflect.DeepEqual(offered, run) {
		t.Errorf("offered specs differ from the tools tool-invoke runs:\noffered %+v\nrun     %+v", offered, run)
	}
	if len(offered) != 7 {
		t.Errorf("%d knowledge tools offered, want 7 (with download_kb_file and get_mindmap)", len(offered))
	}
}

func TestAnOfferedToolIsNeverRunHere(t *testing.T) {
	tl := chat.Offered(kbspec.QueryKB())[0]
	if _, err := tl.Invoke(context.Background(), tool.Call{RunID: "run_1", ToolCallID: "call_1"}); err == nil {
		t.Fatal("an offered tool ran in a process that only offers it")
	}
}
