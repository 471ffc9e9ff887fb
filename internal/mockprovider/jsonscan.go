package mockprovider

import (
	"errors"
	"fmt"
	"sync"

	"github.com/omniroute/gateway/internal/jsonscan"
)

// reqInfo is what the mock needs from a request body. It comes from the
// gateway's own validating scanner (internal/jsonscan), which does not
// allocate, because encoding/json on every request would dominate the
// benchmark's "direct" baseline.
type reqInfo struct {
	modelRaw     []byte // the JSON string token, quotes included (safe to echo)
	model        []byte // the model name (unescaped)
	stream       bool
	includeUsage bool // stream_options.include_usage
}

var errNoModel = errors.New(`request body has no string "model"`)

// parseRequest validates b as a JSON object and extracts the top-level
// "model", "stream" and "stream_options.include_usage". Like a strict
// provider, it rejects a body that names a routed field twice.
// scans pools the scan state: it keeps its buffers (the members it
// records), so reading a request allocates nothing once warm.
var scans = sync.Pool{New: func() any { return new(jsonscan.Request) }}

func parseRequest(b []byte) (reqInfo, error) {
	r := scans.Get().(*jsonscan.Request)
	defer scans.Put(r)
	if err := jsonscan.ScanRequest(b, r); err != nil {
		var se *jsonscan.SyntaxError
		if errors.As(err, &se) {
			return reqInfo{}, fmt.Errorf("request body is not valid JSON: %w", err)
		}
		return reqInfo{}, err
	}
	if r.ModelStart < 0 || !r.ModelIsString || len(r.Model) == 0 {
		return reqInfo{}, errNoModel
	}
	model := r.Model
	if len(model) != r.ModelEnd-r.ModelStart-2 {
		// Written with escapes: unescaped into the scan's scratch, which
		// goes back to the pool.
		model = append([]byte(nil), model...)
	}
	return reqInfo{modelRaw: b[r.ModelStart:r.ModelEnd], model: model, stream: r.Stream, includeUsage: r.IncludeUsage}, nil
}
