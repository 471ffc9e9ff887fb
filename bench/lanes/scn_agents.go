package lanes

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	alanes "github.com/omniroute/gateway/actors/lanes"

	"github.com/omniroute/gateway/bench/loadgen"
	"github.com/omniroute/gateway/internal/mockprovider"
)

// Claude Code-shaped requests (/work/shared/reference/coding-agents.md):
// Anthropic Messages, streamed, 25 tools, max_tokens 32000, thinking, a
// system prompt and blocks with cache_control, tool_use / tool_result
// turns; 76–85 KB bodies in a fresh session and far more in long ones.
const (
	agentTools     = 25
	agentMaxTokens = 32000
	agentCount     = 8
)

// agentBody builds a Claude Code-shaped request of about size bytes: the
// transcript grows by one tool round trip (assistant tool_use, user
// tool_result) per ~8 KB, as a session does.
func agentBody(model string, size int) (body []byte, messages int) {
	type m = map[string]any
	tools := make([]m, agentTools)
	for i := range tools {
		tools[i] = m{"name": fmt.Sprintf("Tool%02d", i), "description": strings.Repeat("Runs one coding-agent action. ", 12),
			"input_schema": m{"type": "object", "properties": m{"path": m{"type": "string"}, "content": m{"type": "string"}}, "required": []string{"path"}}}
	}
	req := m{
		"model": model, "max_tokens": agentMaxTokens, "stream": true,
		"system":   []m{{"type": "text", "text": strings.Repeat("You are an interactive coding agent. ", 40), "cache_control": m{"type": "ephemeral"}}},
		"thinking": m{"type": "enabled", "budget_tokens": 16000},
		"tools":    tools,
		"metadata": m{"user_id": "bench-agent"},
	}
	msgs := []m{{"role": "user", "content": []m{{"type": "text", "text": "Fix the failing test."}}}}
	build := func() []byte {
		req["messages"] = msgs
		b, err := json.Marshal(req)
		if err != nil {
			panic("lanes: encode agent body: " + err.Error()) // maps of strings and numbers always encode
		}
		return b
	}
	b := build()
	// One tool round trip per ~8 KB of transcript; the last tool result is
	// then padded so the body has exactly size bytes (its padding is ASCII,
	// one byte per character in JSON).
	const turnBytes = 8 << 10
	turns := max(1, (size-len(b)+turnBytes-1)/turnBytes)
	var last m
	for turn := range turns {
		id := fmt.Sprintf("toolu_%04d", turn)
		last = m{"type": "tool_result", "tool_use_id": id, "content": strings.Repeat("x", turnBytes-300), "cache_control": m{"type": "ephemeral"}}
		msgs = append(msgs,
			m{"role": "assistant", "content": []m{{"type": "tool_use", "id": id, "name": "Tool03", "input": m{"path": "src/main.go"}}}},
			m{"role": "user", "content": []m{last}})
	}
	b = build()
	last["content"] = strings.Repeat("x", max(1, turnBytes-300+size-len(b)))
	return build(), len(msgs)
}

// agentSizes spreads the agents' bodies log-uniformly over 80 KB–1 MB.
func agentSizes(n int) []int {
	out := make([]int, n)
	for i := range out {
		f := 0.0
		if n > 1 {
			f = float64(i) / float64(n-1)
		}
		out[i] = int(80e3 * math.Pow(1e6/80e3, f))
	}
	return out
}

const agentFile = `{"providers":{"anth":{"base_url":"http://MOCK/v1","apis":["messages"],"auth":"none","connections":{"default":{}}}},
 "models":{"claude-agent":{"targets":[{"connection":"anth","model":"m-agent"}]}},"auth":{"mode":"loopback"}}`

type agentsRun struct {
	sent, ok, refused int
	success           float64 // share
	slotsUsed         float64 // mock mean in flight ÷ slots
	codes             map[string]int
	seedRun
}

// RunCodingAgents: eight agents, each with its own key, send Claude
// Code-shaped streamed requests one after another (80 KB–1 MB bodies, 25
// tools, max_tokens 32000) to a provider with one slot per agent (time to
// first token 300 ms, 20 chunks 25 ms apart). Gates: no admission
// refusal (agentRefusal), ≥ 99 % success, provider slots ≥ 90 % used.
func RunCodingAgents(ctx context.Context, o Options) (Report, error) {
	rep, env := openGate(&o, "coding-agents")
	rep.note("mock (Anthropic Messages) %d slots, 300 ms to the first token + 20 chunks × 25 ms; %d agents, closed loop (no think time; %v pause after a 429/503, an SDK's first retry delay), 20 s", agentCount, agentCount, refusedPause)
	var costs []string
	for _, size := range agentSizes(agentCount) {
		b, msgs := agentBody("claude-agent", size)
		costs = append(costs, fmt.Sprintf("%d KB %d messages: %g", len(b)/1000, msgs, estimateCost(len(b))))
	}
	rep.note("bodies and their cost by internal/admission's default quanta: %s", strings.Join(costs, "; "))
	// The agents are closed loops with fixed bodies: no arrival process
	// to seed, but three runs all the same.
	runs, err := runSeeds(o, func(int64) (agentsRun, error) { return runCodingAgents(ctx, o, env) })
	if err != nil {
		return rep, err
	}
	rep.figureSeeds("requests", colOf(runs, func(r agentsRun) float64 { return float64(r.sent) }), "")
	for i, r := range runs {
		// Every seed's: the gate is zero refusals, and one in a later
		// seed must say what it was.
		rep.note("error codes, seed %d: %s", i+1, topCodes(r.codes, 5))
	}
	rep.gate("coding agents: admission refusals", aggMax, colOf(runs, func(r agentsRun) float64 { return float64(r.refused) }), "= 0", "requests",
		func(v float64) bool { return v == 0 }, "any code of the lanes' refusal table or of the ingest byte budget")
	rep.gate("coding agents: success", aggMedian, colOf(runs, func(r agentsRun) float64 { return 100 * r.success }), "≥ 99", "%",
		func(v float64) bool { return v >= 99 }, "complete streams (message_stop seen) among all requests")
	rep.gate("coding agents: provider slots used", aggMedian, colOf(runs, func(r agentsRun) float64 { return 100 * r.slotsUsed }), "≥ 90", "%",
		func(v float64) bool { return v >= 90 }, "mock's mean in flight ÷ %d slots, from 1 s after the start to the end of sending", agentCount)
	b := runs[0].seed()
	rep.account("coding-agents", b.samples, b.mock, b.drained, nil, false)
	return rep, nil
}

func runCodingAgents(ctx context.Context, o Options, env map[string]string) (agentsRun, error) {
	out := agentsRun{codes: map[string]int{}}
	dur := phases(o, 20*time.Second, 2*time.Second)
	r, err := startRig(agentFile, env, map[string]mockprovider.Behavior{"m-agent": {LatencyMS: 300, ChunkCount: 20, ChunkGapMS: 25, Slots: agentCount}})
	if err != nil {
		return out, err
	}
	defer r.close()
	t0 := time.Now()
	ob := r.observe(t0, 250*time.Millisecond, "m-agent")
	sums := make([]loadgen.Summary, agentCount)
	errs := make([]error, agentCount)
	per := make([][]sample, agentCount)
	var wg sync.WaitGroup
	for i, size := range agentSizes(agentCount) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, _ := agentBody("claude-agent", size)
			c := loadgen.NewClient(r.addr, 1)
			defer c.Close()
			spec := &loadgen.Spec{Path: "/v1/messages", Body: b, Stream: true, Timeout: time.Minute, Headers: [][2]string{
				{"x-api-key", fmt.Sprintf("agent-%d", i)}, {"anthropic-version", "2023-06-01"}, {"anthropic-beta", "claude-code-20250219"},
				{"X-Claude-Code-Session-Id", fmt.Sprintf("session-%d", i)}, {"X-Stainless-Timeout", "600"}}}
			res, err := loadgen.Run(ctx, c, spec, loadgen.Load{Concurrency: 1, Duration: dur, PauseAfterRejection: refusedPause})
			if err != nil {
				errs[i] = err
				return
			}
			sums[i] = loadgen.Summarize(res, true)
			per[i] = recordSamples(res.Records)
		}()
	}
	wg.Wait()
	var all []sample
	for _, ss := range per {
		all = append(all, ss...)
	}
	pts := ob.finish()
	for _, err := range errs {
		if err != nil {
			return out, err
		}
	}
	out.settle(r, all, pts)
	for _, s := range sums {
		out.sent += s.Arrivals
		out.ok += s.OK
		for k, v := range s.Codes {
			out.codes[k] += v
			if agentRefusal(k) {
				out.refused += v
			}
		}
	}
	if out.sent == 0 {
		return out, errNoSamples
	}
	out.success = float64(out.ok) / float64(out.sent)
	in, _ := meanInflight(between(pts, time.Second, dur), "m-agent")
	out.slotsUsed = in / agentCount
	return out, nil
}

// recordSamples turns load-generator records into samples for the
// accounting check: a stream that broke after its 200, and a request that
// got no answer, count as status -1.
func recordSamples(recs []loadgen.Record) []sample {
	out := make([]sample, 0, len(recs))
	for _, rec := range recs {
		s := sample{at: time.Duration(rec.Start), latency: time.Duration(rec.End - rec.Start), status: int(rec.Status), code: rec.Code, waitMS: -1}
		if !rec.Answered() || rec.Outcome != loadgen.OK && s.status == 200 {
			s.status = -1
		}
		out = append(out, s)
	}
	return out
}

// ingestRefusals are the ingest byte budget's refusal codes: a body the
// gateway would not take in, whatever the upstream.
var ingestRefusals = map[string]bool{"chat_admission_busy": true, "body_exceeds_budget": true, "resource_pressure": true}

// agentRefusal reports whether code is an admission refusal: one of the
// lanes' (their table of reasons) or the ingest budget's. An agent's
// request refused by admission is an agent turn lost, whatever the
// reason.
func agentRefusal(code string) bool {
	if ingestRefusals[code] {
		return true
	}
	for _, r := range alanes.Rejections() {
		if r.Code() == code {
			return true
		}
	}
	return false
}
