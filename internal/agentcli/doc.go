// Package agentcli holds the end-to-end test that drives real coding
// agents through the gateway: Claude Code (Anthropic Messages) and Codex
// (OpenAI Responses), installed from npm by install.sh, each against an
// upstream that speaks only OpenAI Chat Completions, so every request is
// translated. The mock provider scripts a call to a tool each agent really
// has (Claude Code's Bash, Codex's exec), the agent runs it, and the test
// passes when the agent's final answer quotes what the tool printed.
//
// Run it alone with
//
//	bash internal/agentcli/install.sh && go test ./internal/agentcli
//
// The package has no non-test code; this file exists for the
// documentation.
package agentcli
