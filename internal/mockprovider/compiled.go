package mockprovider

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultText is the reply when Behavior.Text is empty.
const DefaultText = "Hello from the OmniRoute mock provider. This reply is deterministic and arrives in chunks."

// DefaultChunkCount is the number of stream content deltas when
// Behavior.ChunkCount is 0.
const DefaultChunkCount = 5

// compiled is a Behavior with everything a request needs pre-rendered, so
// serving never escapes JSON or splits text. One compiled value exists per
// configured behaviour; replacing a behaviour creates a new one, which is
// also what restarts its FailSpec.Times count and its rate-limit window.
type compiled struct {
	b          Behavior
	chunks     int
	completion int
	latency    time.Duration
	gap        time.Duration
	textJSON   []byte   // JSON string literal (quotes included) of the whole reply
	chunkJSON  [][]byte // JSON string literal of each chunk
	rl         rateConf
	failCount  atomic.Int64
	// retired is closed when this behaviour is replaced (schedule.go):
	// requests it holds in a hang are then released.
	retired    chan struct{}
	retireOnce sync.Once
	tool       *compiledTool
}

func compile(b Behavior) *compiled {
	c := &compiled{b: b, chunks: b.ChunkCount, retired: make(chan struct{})}
	if c.chunks == 0 {
		c.chunks = DefaultChunkCount
	}
	c.completion = b.CompletionTokens
	if c.completion == 0 {
		c.completion = c.chunks
	}
	c.latency = time.Duration(b.LatencyMS) * time.Millisecond
	c.gap = time.Duration(b.ChunkGapMS) * time.Millisecond
	text := b.Text
	if text == "" {
		text = DefaultText
	}
	c.textJSON = jsonString(text)
	runes := []rune(text)
	c.chunkJSON = make([][]byte, c.chunks)
	for i := range c.chunks {
		lo, hi := i*len(runes)/c.chunks, (i+1)*len(runes)/c.chunks
		c.chunkJSON[i] = jsonString(string(runes[lo:hi]))
	}
	c.rl = newRateConf(b.RateLimit)
	c.tool = compileTool(b.Tool, c.chunks)
	return c
}

// failing decides whether this request gets the injected failure, consuming
// one of FailSpec.Times.
func (c *compiled) failing() bool {
	if c.b.Fail.Mode == FailNone {
		return false
	}
	if c.b.Fail.Times == 0 {
		return true
	}
	return c.failCount.Add(1) <= int64(c.b.Fail.Times)
}

func jsonString(s string) []byte {
	out, err := json.Marshal(s)
	if err != nil { // cannot happen for a string
		panic("mockprovider: marshal string: " + err.Error())
	}
	return out
}

// behaviorTable is the immutable routing table from model to behaviour.
// It is swapped atomically so the request path reads it without locks.
type behaviorTable struct {
	def    *compiled
	models map[string]*compiled
}

func (t *behaviorTable) lookup(model []byte) *compiled {
	if c, ok := t.models[string(model)]; ok {
		return c
	}
	return t.def
}

// apply returns the table after u; behaviours not mentioned keep their
// compiled state (and so their Times count and rate window).
func (t *behaviorTable) apply(u BehaviorUpdate) *behaviorTable {
	next := &behaviorTable{def: t.def, models: make(map[string]*compiled, len(u.Models)+len(t.models))}
	if u.Default != nil {
		next.def = compile(*u.Default)
	}
	if !u.Replace {
		for name, c := range t.models {
			next.models[name] = c
		}
	}
	for name, b := range u.Models {
		next.models[name] = compile(b)
	}
	return next
}

// snapshot renders the table for the admin API.
func (t *behaviorTable) snapshot() BehaviorSnapshot {
	s := BehaviorSnapshot{Default: t.def.b, Models: make(map[string]Behavior, len(t.models))}
	for name, c := range t.models {
		s.Models[name] = c.b
	}
	return s
}

// BehaviorSnapshot is the current configuration, as returned by
// GET /_mock/behavior.
type BehaviorSnapshot struct {
	Default Behavior            `json:"default"`
	Models  map[string]Behavior `json:"models"`
}
