package transport

import (
	"time"

	"github.com/omniroute/gateway/transport/edge"
)

// extendChunkedDeadline re-arms a chunked body's read deadline after
// total bytes arrived since readStart (the edge's body deadlines,
// edge/deadlines.go).
func (c *call) extendChunkedDeadline(readStart time.Time, total int64) {
	if conn := c.ctx.Conn(); conn != nil && c.host == nil {
		_ = conn.SetReadDeadline(readStart.Add(c.g.edge.BodyDeadline(total + edge.ChunkWindow)))
	}
}
