package plan

import (
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/rendezvous"
)

// A conversation keeps its target while it can, so the provider's
// prompt cache keeps hitting (an agent's every turn resends the whole
// history; cached input costs a tenth or less). A round-robin model
// routes a request of a known conversation by weighted rendezvous over
// its targets (internal/routing.Affinity): the same target on every
// node, moved only when that target is unusable (cooling, open circuit,
// out of quota, over its token budget, too small a window), saturated
// (its upstream has no room: the next choice serves) or over a limit.
// A priority model keeps its order as before.

// sessionHeaders are the headers agents name their conversation in:
// Claude Code's, and Codex's (which sends the same id as Thread-Id).
var sessionHeaders = []string{"X-Claude-Code-Session-Id", "Session-Id", "Session_id", "Thread-Id"}

// sessionKey identifies the request's conversation: by its session
// header, else prompt_cache_key, else metadata.user_id (Claude Code
// writes its session id into it), else, for a turn that continues a
// conversation (three messages or more), a hash of its opening (the
// system prompt and the first two messages, which every later turn
// repeats). 0 when nothing tells it: a first turn without an id, or a
// stateless request, rotates as the strategy says, so identical
// one-shot requests still spread.
func sessionKey(r Request) uint64 {
	h := &r.Ctx().Request.Header
	for i, name := range sessionHeaders {
		if v := h.Peek(name); len(v) > 0 {
			return rendezvous.Combine(uint64(i+1), v)
		}
	}
	body, scan := r.Parsed()
	if len(scan.PromptCacheKey) > 0 {
		return rendezvous.Combine(10, scan.PromptCacheKey)
	}
	if scan.MetadataStart >= 0 {
		if u := jsonscan.Get(body[scan.MetadataStart:scan.MetadataEnd], "user_id"); len(u) > 0 {
			return rendezvous.Combine(11, u)
		}
	}
	if scan.Messages < 3 || scan.OpeningStart < 0 || scan.OpeningEnd <= scan.OpeningStart {
		return 0
	}
	k := uint64(12)
	if scan.SystemStart >= 0 {
		k = rendezvous.Combine(k, body[scan.SystemStart:scan.SystemEnd])
	}
	return rendezvous.Combine(k, body[scan.OpeningStart:scan.OpeningEnd])
}

// targetHashes fills the session's hashes with list's targets' hashes
// (rendezvous members), by position.
func (st *State) targetHashes(list []*catalog.Target) []uint64 {
	st.sess.hashes = st.sess.hashes[:0]
	for _, t := range list {
		st.sess.hashes = append(st.sess.hashes, t.Hash)
	}
	return st.sess.hashes
}

// sessionState is a request's session affinity: the conversation's key
// (0: none found), computed once (done), and the candidates' hashes.
type sessionState struct {
	key    uint64
	done   bool
	hashes []uint64
}
