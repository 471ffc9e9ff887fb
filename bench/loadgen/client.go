package loadgen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"time"

	"github.com/valyala/fasthttp"
)

// Spec is the request every arrival sends. Body is shared read-only by all
// workers and never copied.
type Spec struct {
	// Path is the request path, e.g. /v1/chat/completions.
	Path string
	// Body is the JSON body.
	Body []byte
	// Stream makes the client read the answer as server-sent events.
	Stream bool
	// Headers are extra request headers (Content-Type is always JSON).
	Headers [][2]string
	// Timeout bounds one request from its actual send to its last byte.
	Timeout time.Duration
}

// Client sends to one target address over a fasthttp HostClient: a
// keep-alive pool with one connection per worker at most, so a worker
// never waits for a connection inside the client.
type Client struct {
	hc  *fasthttp.HostClient
	uri string
}

// NewClient returns a client for addr (host:port) allowing maxConns
// connections.
func NewClient(addr string, maxConns int) *Client {
	return &Client{
		uri: "http://" + addr,
		hc: &fasthttp.HostClient{
			Addr:                          addr,
			MaxConns:                      maxConns,
			MaxIdleConnDuration:           30 * time.Second,
			NoDefaultUserAgentHeader:      true,
			DisableHeaderNamesNormalizing: true,
			DisablePathNormalizing:        true,
			ReadBufferSize:                8 << 10,
			Dial: func(a string) (net.Conn, error) {
				return (&net.Dialer{Timeout: 5 * time.Second}).Dial("tcp", a)
			},
		},
	}
}

// Close drops idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// worker holds per-goroutine scratch so the hot loop does not allocate.
type worker struct {
	br    *bufio.Reader
	since func() int64
}

func newWorker(since func() int64) *worker {
	return &worker{br: bufio.NewReaderSize(nil, 16<<10), since: since}
}

var (
	headerRetryAfter   = []byte("Retry-After")
	headerRetryAfterMS = []byte("retry-after-ms")
	dataPrefix         = []byte("data:")
	eventError         = []byte("event: error")
	doneMarker         = []byte("[DONE]")
	contentKey         = []byte(`"content":"`)
	// Anthropic Messages streams end with message_stop (no [DONE]) and
	// carry text in text_delta content blocks.
	eventMessageStop = []byte("event: message_stop")
	textDeltaKey     = []byte(`"type":"text_delta"`)
	errorPrefix      = []byte(`{"error"`)
)

// do sends one request and fills rec (Intended must already be set).
func (c *Client) do(w *worker, s *Spec, rec *Record) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(c.uri + s.Path)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	for _, h := range s.Headers {
		req.Header.Set(h[0], h[1])
	}
	req.SetBodyRaw(s.Body)
	resp.StreamBody = s.Stream

	rec.Start = w.since()
	err := c.hc.DoDeadline(req, resp, time.Now().Add(s.Timeout))
	if err != nil {
		rec.End = w.since()
		rec.Outcome = classify(err)
		return
	}
	rec.Status = int16(resp.StatusCode())
	if rec.Status == fasthttp.StatusTooManyRequests || rec.Status == fasthttp.StatusServiceUnavailable {
		rec.RetryAfter = len(resp.Header.PeekBytes(headerRetryAfter)) > 0 || len(resp.Header.PeekBytes(headerRetryAfterMS)) > 0
	}
	if !s.Stream {
		rec.End = w.since()
		if rec.Status >= 200 && rec.Status < 300 {
			rec.Outcome = OK
			return
		}
		rec.Outcome = HTTPError
		rec.Code = errorCode(resp.Body())
		return
	}
	body := resp.BodyStream()
	if body == nil {
		body = bytes.NewReader(resp.Body())
	}
	if rec.Status < 200 || rec.Status >= 300 {
		b, _ := io.ReadAll(io.LimitReader(body, 64<<10))
		_ = resp.CloseBodyStream()
		rec.End = w.since()
		rec.Outcome = HTTPError
		rec.Code = errorCode(b)
		return
	}
	rec.Outcome, rec.Code = w.readEvents(body, rec)
	_ = resp.CloseBodyStream()
	rec.End = w.since()
}

// readEvents reads an SSE body to its end, counting data events, stamping
// the first content event and spotting in-band errors. A stream is complete
// after its terminal event: [DONE] (OpenAI chat) or message_stop
// (Anthropic Messages).
func (w *worker) readEvents(body io.Reader, rec *Record) (Outcome, string) {
	w.br.Reset(body)
	defer w.br.Reset(nil)
	done, sawErrorEvent := false, false
	for {
		line, err := w.br.ReadSlice('\n')
		if len(line) > 0 {
			line = bytes.TrimRight(line, "\r\n")
			switch {
			case bytes.HasPrefix(line, dataPrefix):
				payload := bytes.TrimLeft(line[len(dataPrefix):], " ")
				rec.Events++
				switch {
				case bytes.Equal(payload, doneMarker):
					done = true
				case sawErrorEvent || bytes.HasPrefix(payload, errorPrefix):
					return InBandError, errorCode(payload)
				case rec.First == 0 && hasContent(payload):
					rec.First = w.since()
				}
			case bytes.Equal(line, eventError):
				sawErrorEvent = true
			case bytes.Equal(line, eventMessageStop):
				done = true
			}
		}
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				// An event longer than the buffer: skip the rest of the line.
				for errors.Is(err, bufio.ErrBufferFull) {
					_, err = w.br.ReadSlice('\n')
				}
				if err == nil {
					continue
				}
			}
			switch {
			case done && errors.Is(err, io.EOF):
				return OK, ""
			case errors.Is(err, io.EOF):
				return Truncated, ""
			default:
				return classify(err), ""
			}
		}
	}
}

// hasContent reports whether a chat chunk carries non-empty delta content
// (the role-only opening chunk has "content":""), or an Anthropic event a
// text delta.
func hasContent(p []byte) bool {
	i := bytes.Index(p, contentKey)
	return i >= 0 && i+len(contentKey) < len(p) && p[i+len(contentKey)] != '"' || bytes.Contains(p, textDeltaKey)
}

func classify(err error) Outcome {
	var ne net.Error
	switch {
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, os.ErrDeadlineExceeded):
		return Timeout
	case errors.As(err, &ne) && ne.Timeout():
		return Timeout
	}
	return ConnError
}

// errorCode extracts the machine-readable code of an OpenAI
// ({"error":{"code"}}) or Anthropic ({"error":{"type"}}) error body; "" when
// the body has none.
func errorCode(body []byte) string {
	var e struct {
		Error struct {
			Code any    `json:"code"`
			Type string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	if s, ok := e.Error.Code.(string); ok && s != "" {
		return s
	}
	return e.Error.Type
}
