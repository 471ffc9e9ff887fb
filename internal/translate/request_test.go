package translate

import (
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/dialect"
)

// reqCase is a documented request of one dialect and what each upstream
// dialect must receive for it: a body (compared by JSON value) and the
// fields dropped by rule, or a refusal naming the field.
type reqCase struct {
	name string
	from dialect.ID
	body string
	want map[dialect.ID]reqWant
}

type reqWant struct {
	body    string
	dropped []string
	field   string // refusal: the field named
	code    apierror.Code
}

const weatherSchema = `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`

var reqCases = []reqCase{
	{
		name: "chat basic", from: dialect.Chat,
		body: `{"model":"gpt-4o","messages":[{"role":"developer","content":"You are terse."},{"role":"user","content":"Hello!"}],"temperature":0.2,"top_p":0.9,"max_completion_tokens":256,"stop":"\n\n","stream":true,"stream_options":{"include_usage":true},"user":"u-1","seed":7}`,
		want: map[dialect.ID]reqWant{
			dialect.Messages: {body: `{"model":"up","max_tokens":256,"system":[{"type":"text","text":"You are terse.","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"Hello!","cache_control":{"type":"ephemeral"}}]}],"temperature":0.2,"top_p":0.9,"stop_sequences":["\n\n"],"stream":true,"metadata":{"user_id":"u-1"}}`,
				dropped: []string{"seed"}},
			dialect.Responses: {field: "stop", code: CodeUnsupported},
			dialect.Chat: {body: `{"model":"up","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Hello!"}],"max_tokens":256,"temperature":0.2,"top_p":0.9,"stop":["\n\n"],"stream":true,"stream_options":{"include_usage":true},"user":"u-1"}`,
				dropped: []string{"seed"}},
		},
	},
	{
		name: "chat without stop", from: dialect.Chat,
		body: `{"model":"gpt-4o","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Hello!"}],"max_tokens":256,"stream":true,"user":"u-1"}`,
		want: map[dialect.ID]reqWant{
			dialect.Responses: {body: `{"model":"up","instructions":"You are terse.","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Hello!"}]}],"max_output_tokens":256,"stream":true,"store":false,"user":"u-1"}`},
		},
	},
	{
		name: "chat tool loop with images and structured output", from: dialect.Chat,
		body: `{"model":"gpt-4o","messages":[
			{"role":"system","content":[{"type":"text","text":"Use tools."}]},
			{"role":"user","content":[{"type":"text","text":"Weather here?"},{"type":"image_url","image_url":{"url":"https://example.com/sky.jpg","detail":"low"}},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]},
			{"role":"assistant","content":"Checking.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"call_2","type":"function","function":{"name":"get_time","arguments":""}}]},
			{"role":"tool","tool_call_id":"call_1","content":"18C"},
			{"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"09:00"}]}],
			"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather for a city","parameters":` + weatherSchema + `,"strict":true}},{"type":"function","function":{"name":"get_time"}}],
			"tool_choice":{"type":"function","function":{"name":"get_weather"}},"parallel_tool_calls":false,"reasoning_effort":"medium",
			"response_format":{"type":"json_schema","json_schema":{"name":"weather","schema":{"type":"object","properties":{"t":{"type":"number"}},"required":["t"],"additionalProperties":false},"strict":true}}}`,
		want: map[dialect.ID]reqWant{
			dialect.Messages: {body: `{"model":"up","max_tokens":4096,
				"system":[{"type":"text","text":"Use tools.","cache_control":{"type":"ephemeral"}}],
				"messages":[
					{"role":"user","content":[{"type":"text","text":"Weather here?"},{"type":"image","source":{"type":"url","url":"https://example.com/sky.jpg"}},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="},"cache_control":{"type":"ephemeral"}}]},
					{"role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"call_1","name":"get_weather","input":{"city":"Paris"}},{"type":"tool_use","id":"call_2","name":"get_time","input":{}}]},
					{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"18C"},{"type":"tool_result","tool_use_id":"call_2","content":"09:00","cache_control":{"type":"ephemeral"}}]}],
				"tools":[{"name":"get_weather","description":"Weather for a city","input_schema":` + weatherSchema + `,"strict":true},{"name":"get_time","input_schema":{"type":"object","properties":{}},"cache_control":{"type":"ephemeral"}}],
				"tool_choice":{"type":"tool","name":"get_weather","disable_parallel_tool_use":true},
				"output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"t":{"type":"number"}},"required":["t"],"additionalProperties":false}}}}`,
				dropped: []string{"reasoning_effort", "detail"}},
			dialect.Responses: {body: `{"model":"up","instructions":"Use tools.","input":[
					{"type":"message","role":"user","content":[{"type":"input_text","text":"Weather here?"},{"type":"input_image","image_url":"https://example.com/sky.jpg","detail":"low"},{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo=","detail":"auto"}]},
					{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Checking."}]},
					{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
					{"type":"function_call","call_id":"call_2","name":"get_time","arguments":""},
					{"type":"function_call_output","call_id":"call_1","output":"18C"},
					{"type":"function_call_output","call_id":"call_2","output":"09:00"}],
				"tools":[{"type":"function","name":"get_weather","description":"Weather for a city","parameters":` + weatherSchema + `,"strict":true},{"type":"function","name":"get_time","parameters":{"type":"object","properties":{}},"strict":false}],
				"parallel_tool_calls":false,"tool_choice":{"type":"function","name":"get_weather"},"store":false,"reasoning":{"effort":"medium"},
				"text":{"format":{"type":"json_schema","name":"weather","schema":{"type":"object","properties":{"t":{"type":"number"}},"required":["t"],"additionalProperties":false},"strict":true}}}`},
			dialect.Chat: {body: `{"model":"up","messages":[{"role":"system","content":"Use tools."},
					{"role":"user","content":[{"type":"text","text":"Weather here?"},{"type":"image_url","image_url":{"url":"https://example.com/sky.jpg","detail":"low"}},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]},
					{"role":"assistant","content":"Checking.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"call_2","type":"function","function":{"name":"get_time","arguments":""}}]},
					{"role":"tool","tool_call_id":"call_1","content":"18C"},{"role":"tool","tool_call_id":"call_2","content":"09:00"}],
				"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather for a city","parameters":` + weatherSchema + `,"strict":true}},{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{}}}}],
				"parallel_tool_calls":false,"tool_choice":{"type":"function","function":{"name":"get_weather"}},"reasoning_effort":"medium",
				"response_format":{"type":"json_schema","json_schema":{"name":"weather","schema":{"type":"object","properties":{"t":{"type":"number"}},"required":["t"],"additionalProperties":false},"strict":true}}}`},
		},
	},
	{
		name: "messages as Claude Code sends it", from: dialect.Messages,
		body: `{"model":"claude-opus-4-8","max_tokens":32000,"stream":true,
			"system":[{"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"Env: linux"}],
			"tools":[{"name":"Read","description":"Read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}},{"type":"web_search_20250305","name":"web_search","max_uses":5}],
			"tool_choice":{"type":"auto","disable_parallel_tool_use":true},
			"thinking":{"type":"enabled","budget_tokens":16000},
			"metadata":{"user_id":"user_abc"},
			"messages":[
				{"role":"user","content":[{"type":"text","text":"Read main.go","cache_control":{"type":"ephemeral"}}]},
				{"role":"assistant","content":[{"type":"thinking","thinking":"Need the file.","signature":"sig-1"},{"type":"text","text":"Reading."},{"type":"tool_use","id":"toolu_1","name":"Read","input":{"path":"main.go"}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"package main"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]},{"type":"text","text":"Explain it."}]}],
			"context_management":{"edits":[]}}`,
		want: map[dialect.ID]reqWant{
			dialect.Chat: {body: `{"model":"up","messages":[
					{"role":"system","content":"You are Claude Code.\n\nEnv: linux"},
					{"role":"user","content":"Read main.go"},
					{"role":"assistant","content":"Reading.","tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"Read","arguments":"{\"path\":\"main.go\"}"}}]},
					{"role":"tool","tool_call_id":"toolu_1","content":"package main"},
					{"role":"user","content":[{"type":"text","text":"Explain it."},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}],
				"tools":[{"type":"function","function":{"name":"Read","description":"Read a file","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}}],
				"parallel_tool_calls":false,"tool_choice":"auto","max_tokens":32000,"stream":true,"stream_options":{"include_usage":true},"reasoning_effort":"medium"}`,
				dropped: []string{"tools[].type=\"web_search_20250305\"", "metadata", "context_management", "cache_control", "reasoning"}},
			dialect.Responses: {body: `{"model":"up","instructions":"You are Claude Code.\n\nEnv: linux","input":[
					{"type":"message","role":"user","content":[{"type":"input_text","text":"Read main.go"}]},
					{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Reading."}]},
					{"type":"function_call","call_id":"toolu_1","name":"Read","arguments":"{\"path\":\"main.go\"}"},
					{"type":"function_call_output","call_id":"toolu_1","output":[{"type":"input_text","text":"package main"},{"type":"input_image","image_url":"data:image/png;base64,AAAA","detail":"auto"}]},
					{"type":"message","role":"user","content":[{"type":"input_text","text":"Explain it."}]}],
				"tools":[{"type":"function","name":"Read","description":"Read a file","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]},"strict":false}],
				"parallel_tool_calls":false,"tool_choice":"auto","max_output_tokens":32000,"stream":true,"store":false,
				"reasoning":{"effort":"medium","summary":"auto"},"include":["reasoning.encrypted_content"]}`,
				dropped: []string{"tools[].type=\"web_search_20250305\"", "metadata", "context_management", "cache_control", "reasoning"}},
			dialect.Messages: {body: `{"model":"up","max_tokens":32000,
				"system":[{"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"Env: linux"}],
				"messages":[
					{"role":"user","content":[{"type":"text","text":"Read main.go","cache_control":{"type":"ephemeral"}}]},
					{"role":"assistant","content":[{"type":"thinking","thinking":"Need the file.","signature":"sig-1"},{"type":"text","text":"Reading."},{"type":"tool_use","id":"toolu_1","name":"Read","input":{"path":"main.go"}}]},
					{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"package main"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]},{"type":"text","text":"Explain it."}]}],
				"tools":[{"name":"Read","description":"Read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}],
				"tool_choice":{"type":"auto","disable_parallel_tool_use":true},
				"thinking":{"type":"enabled","budget_tokens":16000},"stream":true}`,
				dropped: []string{"tools[].type=\"web_search_20250305\"", "metadata", "context_management"}},
		},
	},
	{
		name: "responses as Codex sends it", from: dialect.Responses,
		body: `{"model":"gpt-6.2-sol","instructions":"You are Codex.","store":false,"stream":true,
			"include":["reasoning.encrypted_content"],"prompt_cache_key":"sess-1","parallel_tool_calls":false,"tool_choice":"auto",
			"reasoning":{"effort":"high","summary":"auto"},"text":{"verbosity":"low"},
			"tools":[{"type":"function","name":"shell","description":"Run a command","parameters":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}},"required":["command"]},"strict":false},
				{"type":"custom","name":"apply_patch","description":"Apply a patch","format":{"type":"grammar","syntax":"lark","definition":"start: x"}},
				{"type":"web_search"}],
			"input":[
				{"type":"message","role":"developer","content":[{"type":"input_text","text":"Sandbox: workspace-write"}]},
				{"type":"message","role":"user","content":[{"type":"input_text","text":"Fix the bug"}]},
				{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Look first."}],"encrypted_content":"gAAAA-enc"},
				{"type":"function_call","id":"fc_1","call_id":"call_1","name":"shell","arguments":"{\"command\":[\"ls\"]}"},
				{"type":"function_call_output","call_id":"call_1","output":"main.go\n"},
				{"type":"custom_tool_call","id":"ctc_1","call_id":"call_2","name":"apply_patch","input":"*** Begin Patch\n*** End Patch"},
				{"type":"custom_tool_call_output","call_id":"call_2","output":"Done!"},
				{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Fixed."}]},
				{"role":"user","content":"Thanks"}]}`,
		want: map[dialect.ID]reqWant{
			dialect.Chat: {body: `{"model":"up","messages":[
					{"role":"system","content":"You are Codex.\n\nSandbox: workspace-write"},
					{"role":"user","content":"Fix the bug"},
					{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"shell","arguments":"{\"command\":[\"ls\"]}"}}]},
					{"role":"tool","tool_call_id":"call_1","content":"main.go\n"},
					{"role":"assistant","content":null,"tool_calls":[{"id":"call_2","type":"function","function":{"name":"apply_patch","arguments":"{\"input\":\"*** Begin Patch\\n*** End Patch\"}"}}]},
					{"role":"tool","tool_call_id":"call_2","content":"Done!"},
					{"role":"assistant","content":"Fixed."},
					{"role":"user","content":"Thanks"}],
				"tools":[{"type":"function","function":{"name":"shell","description":"Run a command","parameters":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}},"required":["command"]},"strict":false}},
					{"type":"function","function":{"name":"apply_patch","description":"Apply a patch","parameters":` + customSchema + `}}],
				"parallel_tool_calls":false,"tool_choice":"auto","stream":true,"stream_options":{"include_usage":true},"reasoning_effort":"high","prompt_cache_key":"sess-1","verbosity":"low"}`,
				dropped: []string{"tools[].format", "tools[].type=\"web_search\"", "reasoning", "reasoning.summary"}},
			dialect.Messages: {body: `{"model":"up","max_tokens":28672,
				"system":[{"type":"text","text":"You are Codex."},{"type":"text","text":"Sandbox: workspace-write","cache_control":{"type":"ephemeral"}}],
				"messages":[
					{"role":"user","content":[{"type":"text","text":"Fix the bug"}]},
					{"role":"assistant","content":[{"type":"tool_use","id":"call_1","name":"shell","input":{"command":["ls"]}}]},
					{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"main.go\n"}]},
					{"role":"assistant","content":[{"type":"tool_use","id":"call_2","name":"apply_patch","input":{"input":"*** Begin Patch\n*** End Patch"}}]},
					{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_2","content":"Done!","cache_control":{"type":"ephemeral"}}]},
					{"role":"assistant","content":[{"type":"text","text":"Fixed."}]},
					{"role":"user","content":[{"type":"text","text":"Thanks","cache_control":{"type":"ephemeral"}}]}],
				"tools":[{"name":"shell","description":"Run a command","input_schema":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}},"required":["command"]},"strict":false},
					{"name":"apply_patch","description":"Apply a patch","input_schema":` + customSchema + `,"cache_control":{"type":"ephemeral"}}],
				"tool_choice":{"type":"auto","disable_parallel_tool_use":true},
				"thinking":{"type":"enabled","budget_tokens":24576},"stream":true}`,
				dropped: []string{"tools[].format", "tools[].type=\"web_search\"", "reasoning", "prompt_cache_key", "verbosity"}},
		},
	},
}

func init() {
	reqCases = append(reqCases, reqCase{
		name: "chat closing turn with tool history and no tools", from: dialect.Chat,
		body: `{"model":"m","max_tokens":50,"tool_choice":"auto","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"},{"role":"user","content":"summarise"}]}`,
		want: map[dialect.ID]reqWant{
			dialect.Messages: {body: `{"model":"up","max_tokens":50,"messages":[
					{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]},
					{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"f","input":{}}]},
					{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"ok"},{"type":"text","text":"summarise","cache_control":{"type":"ephemeral"}}]}],
				"tools":` + noToolsPlaceholder + `,"tool_choice":{"type":"none"}}`},
			dialect.Responses: {body: `{"model":"up","input":[
					{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]},
					{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},
					{"type":"function_call_output","call_id":"c1","output":"ok"},
					{"type":"message","role":"user","content":[{"type":"input_text","text":"summarise"}]}],
				"max_output_tokens":50,"store":false}`},
		},
	})
}

// refusals are requests a target cannot carry: the field is named.
var refusals = []struct {
	from   dialect.ID
	to     dialect.ID
	body   string
	field  string
	code   apierror.Code
	reason string
}{
	{dialect.Chat, dialect.Messages, `{"model":"m","n":2,"messages":[{"role":"user","content":"x"}]}`, "n", CodeUnsupported, ""},
	{dialect.Chat, dialect.Responses, `{"model":"m","logprobs":true,"messages":[{"role":"user","content":"x"}]}`, "logprobs", CodeUnsupported, ""},
	{dialect.Chat, dialect.Messages, `{"model":"m","audio":{"voice":"alloy"},"messages":[{"role":"user","content":"x"}]}`, "audio", CodeUnsupported, ""},
	{dialect.Chat, dialect.Messages, `{"model":"m","functions":[{"name":"f"}],"messages":[{"role":"user","content":"x"}]}`, "functions", CodeUnsupported, ""},
	{dialect.Chat, dialect.Messages, `{"model":"m","response_format":{"type":"json_object"},"messages":[{"role":"user","content":"x"}]}`, "response_format", CodeUnsupported, ""},
	{dialect.Chat, dialect.Messages, `{"model":"m","temperature":1.5,"messages":[{"role":"user","content":"x"}]}`, "temperature", CodeInvalid, ""},
	{dialect.Chat, dialect.Messages, `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{oops"}}]}]}`, "messages[0].tool_calls.arguments", CodeInvalid, ""},
	{dialect.Chat, dialect.Messages, `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-abc"}}]}]}`, "messages[0].content", CodeUnsupported, ""},
	{dialect.Chat, dialect.Messages, `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"x","format":"wav"}}]}]}`, "messages[0].content[0].type", CodeUnsupported, ""},
	{dialect.Chat, dialect.Messages, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,raw"}}]}]}`, "messages[0].content[0].image_url.url", CodeInvalid, ""},
	{dialect.Chat, dialect.Messages, `{"model":"m","messages":[{"role":"wizard","content":"x"}]}`, "messages[0].role", CodeInvalid, ""},
	{dialect.Chat, dialect.Messages, `{"model":"m","messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id", CodeInvalid, ""},
	{dialect.Chat, dialect.Messages, `{"model":"m","messages":"hi"}`, "messages", CodeInvalid, ""},
	{dialect.Chat, dialect.Messages, `{"model":"m","reasoning_effort":"extreme","messages":[]}`, "reasoning_effort", CodeInvalid, ""},
	{dialect.Messages, dialect.Chat, `{"model":"m","max_tokens":5,"mcp_servers":[{"url":"https://x"}],"messages":[]}`, "mcp_servers", CodeUnsupported, ""},
	{dialect.Messages, dialect.Chat, `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"server_tool_use","id":"s","name":"web_search","input":{}}]}]}`, "messages[0].content[0].type", CodeUnsupported, ""},
	{dialect.Messages, dialect.Responses, `{"model":"m","max_tokens":5,"stop_sequences":["x"],"messages":[]}`, "stop_sequences", CodeUnsupported, ""},
	{dialect.Messages, dialect.Chat, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}]}]}`, "messages[0].content", CodeUnsupported, ""},
	{dialect.Messages, dialect.Chat, `{"model":"m","max_tokens":5,"thinking":{"type":"enabled"},"messages":[]}`, "thinking.budget_tokens", CodeInvalid, ""},
	{dialect.Responses, dialect.Chat, `{"model":"m","previous_response_id":"resp_1","input":"x"}`, "previous_response_id", CodePreviousResponse, ""},
	{dialect.Responses, dialect.Messages, `{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`, "input[0].type", CodePreviousResponse, ""},
	{dialect.Responses, dialect.Chat, `{"model":"m","input":[{"type":"local_shell_call","call_id":"c","action":{}}]}`, "input[0].type", CodeUnsupported, ""},
	{dialect.Responses, dialect.Messages, `{"model":"m","background":true,"input":"x"}`, "background", CodeUnsupported, ""},
	{dialect.Responses, dialect.Chat, `{"model":"m","input":[{"type":"function_call","name":"f"}]}`, "input[0]", CodeInvalid, ""},
	{dialect.Chat, dialect.Messages, `{"model":"m","messages":[}`, "body", CodeInvalidJSON, ""},
}

func jsonValue(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("invalid JSON %v:\n%s", err, s)
	}
	return v
}

func TestRequestTable(t *testing.T) {
	for _, tc := range reqCases {
		for to, want := range tc.want {
			t.Run(tc.name+" to "+to.String(), func(t *testing.T) {
				tr := New(tc.from, to, Options{Model: "up"})
				out, err := tr.Request([]byte("prefix:"), []byte(tc.body))
				if want.field != "" {
					var te *Error
					if !errors.As(err, &te) || te.Field != want.field || te.Code != want.code {
						t.Fatalf("got %v (%s), want a refusal of %s with %s", err, out, want.field, want.code)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(string(out), "prefix:") {
					t.Fatalf("output does not extend dst: %s", out)
				}
				out = out[len("prefix:"):]
				if got, exp := jsonValue(t, string(out)), jsonValue(t, want.body); !reflect.DeepEqual(got, exp) {
					g, _ := json.MarshalIndent(got, "", " ")
					e, _ := json.MarshalIndent(exp, "", " ")
					t.Errorf("got:\n%s\nwant:\n%s", g, e)
				}
				dropped := append([]string(nil), tr.Dropped()...)
				wantDropped := append([]string(nil), want.dropped...)
				for i, d := range wantDropped {
					wantDropped[i] = strings.ReplaceAll(d, `"`, "")
				}
				sort.Strings(dropped)
				sort.Strings(wantDropped)
				if strings.Join(dropped, ",") != strings.Join(wantDropped, ",") {
					t.Errorf("dropped %q, want %q", dropped, wantDropped)
				}
			})
		}
	}
}

func TestRefusals(t *testing.T) {
	for _, tc := range refusals {
		tr := New(tc.from, tc.to, Options{Model: "up"})
		out, err := tr.Request([]byte("x"), []byte(tc.body))
		var te *Error
		if !errors.As(err, &te) || te.Field != tc.field || te.Code != tc.code {
			t.Errorf("%s→%s %s: got %v, want a refusal naming %s (%s)", tc.from, tc.to, tc.body, err, tc.field, tc.code)
			continue
		}
		if string(out) != "x" {
			t.Errorf("%s: a refusal left output %q", tc.body, out)
		}
		a := te.APIError()
		if a.Status != 400 || a.Code != tc.code.String() || !strings.Contains(a.Message, tc.field) {
			t.Errorf("%s: API error %+v", tc.body, a)
		}
	}
}

// What the coding agents send as of Claude Code 2.1.197 and Codex 0.171.0:
// a system message inside messages, and tools in an additional_tools
// input item, grouped in namespaces.
func init() {
	reqCases = append(reqCases,
		reqCase{
			name: "messages with a system message in the conversation", from: dialect.Messages,
			body: `{"model":"claude-opus-4-8","max_tokens":100,"system":"You are Claude Code.","messages":[
				{"role":"user","content":[{"type":"text","text":"Run ls"}]},
				{"role":"system","content":"Agent types: claude, Explore"}]}`,
			want: map[dialect.ID]reqWant{
				dialect.Chat: {body: `{"model":"up","messages":[
						{"role":"system","content":"You are Claude Code.\n\nAgent types: claude, Explore"},
						{"role":"user","content":"Run ls"}],"max_tokens":100}`},
				dialect.Responses: {body: `{"model":"up","instructions":"You are Claude Code.\n\nAgent types: claude, Explore","input":[
						{"type":"message","role":"user","content":[{"type":"input_text","text":"Run ls"}]}],"max_output_tokens":100,"store":false}`},
			},
		},
		reqCase{
			name: "messages with a system message holding an image", from: dialect.Messages,
			body: `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"},
				{"role":"system","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]}]}`,
			want: map[dialect.ID]reqWant{dialect.Chat: {field: "messages[1].content", code: CodeInvalid}},
		},
		reqCase{
			name: "responses with additional_tools and namespaces as Codex 0.171 sends it", from: dialect.Responses,
			body: `{"model":"gpt-6.2-sol","stream":true,"store":false,"tool_choice":"auto","parallel_tool_calls":false,"input":[
				{"type":"additional_tools","id":"at_1","role":"developer","tools":[
					{"type":"namespace","name":"functions","description":"","tools":[
						{"type":"custom","name":"exec","description":"Run JavaScript","format":{"type":"grammar","syntax":"lark","definition":"start: x"}},
						{"type":"function","name":"wait","description":"Wait on a cell","strict":false,"parameters":{"type":"object","properties":{"cell_id":{"type":"string"}},"required":["cell_id"]}}]},
					{"type":"namespace","name":"clock","tools":[{"type":"function","name":"sleep","parameters":{"type":"object"}}]}]},
				{"type":"message","role":"developer","content":[{"type":"input_text","text":"Be brief."}]},
				{"type":"message","role":"user","content":[{"type":"input_text","text":"Run it"}]}]}`,
			want: map[dialect.ID]reqWant{
				dialect.Chat: {body: `{"model":"up","messages":[
						{"role":"system","content":"Be brief."},
						{"role":"user","content":"Run it"}],
					"tools":[{"type":"function","function":{"name":"exec","description":"Run JavaScript","parameters":` + customSchema + `}},
						{"type":"function","function":{"name":"wait","description":"Wait on a cell","parameters":{"type":"object","properties":{"cell_id":{"type":"string"}},"required":["cell_id"]},"strict":false}},
						{"type":"function","function":{"name":"sleep","parameters":{"type":"object"}}}],
					"parallel_tool_calls":false,"tool_choice":"auto","stream":true,"stream_options":{"include_usage":true}}`,
					dropped: []string{"tools[].format"}},
			},
		},
		reqCase{
			name: "responses with member tools outside a namespace", from: dialect.Responses,
			body: `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","tools":[{"type":"function","name":"g"}]}]}`,
			want: map[dialect.ID]reqWant{dialect.Chat: {field: "tools[0].tools", code: CodeInvalid}},
		},
	)
}

// TestEffortScaleIsTheDialectScale: the scale exported to internal/fit
// is the translator's (the names themselves are checked against
// dialect.Efforts in package ir).
func TestEffortScaleIsTheDialectScale(t *testing.T) {
	if BudgetForEffort("high") != 24576 || EffortForBudget(31999) != "high" || EffortForBudget(2048) != "low" || BudgetForEffort("none") != 0 {
		t.Fatal("the exported scale differs from the translator's")
	}
}

// TestDeferredToolsAreSentAndReported: a Claude Code tool with
// defer_loading (Anthropic's tool search) reaches another dialect as an
// ordinary tool, and the field it lost is reported dropped.
func TestDeferredToolsAreSentAndReported(t *testing.T) {
	tr := New(dialect.Messages, dialect.Chat, Options{Model: "m"})
	out, err := tr.Request(nil, []byte(`{"model":"x","max_tokens":10,"messages":[{"role":"user","content":"hi"}],`+
		`"tools":[{"name":"mcp__db__query","description":"d","input_schema":{"type":"object"},"defer_loading":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"name":"mcp__db__query"`) || strings.Contains(string(out), "defer_loading") {
		t.Fatalf("deferred tool: %s", out)
	}
	if d := tr.Dropped(); len(d) != 1 || d[0] != "tools[].defer_loading" {
		t.Fatalf("dropped %q", d)
	}
}
