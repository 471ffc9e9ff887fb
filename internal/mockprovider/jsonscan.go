package mockprovider

import (
	"errors"
	"fmt"

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
func parseRequest(b []byte) (reqInfo, error) {
	var r jsonscan.Request
	if err := jsonscan.ScanRequest(b, &r); err != nil {
		var se *jsonscan.SyntaxError
		if errors.As(err, &se) {
			return reqInfo{}, fmt.Errorf("request body is not valid JSON: %w", err)
		}
		return reqInfo{}, err
	}
	if r.ModelStart < 0 || !r.ModelIsString || len(r.Model) == 0 {
		return reqInfo{}, errNoModel
	}
	return reqInfo{modelRaw: b[r.ModelStart:r.ModelEnd], model: r.Model, stream: r.Stream, includeUsage: r.IncludeUsage}, nil
}
