package mockprovider

// Anthropic Messages rendering. anthropic-sdk-go skips SSE frames without an
// "event:" line, so every frame names its event.

func (r *render) appendMessageID(dst []byte) []byte {
	dst = append(dst, `"msg_mock_`...)
	dst = appendInt(dst, int64(r.n))
	return append(dst, '"')
}

// appendMessage renders a message object; outputTokens and text differ
// between the non-stream body and the message_start shell.
func (r *render) appendMessage(dst []byte, final bool) []byte {
	dst = append(dst, `{"id":`...)
	dst = r.appendMessageID(dst)
	dst = append(dst, `,"type":"message","role":"assistant","model":`...)
	dst = append(dst, r.modelRaw...)
	if final && r.tool != nil {
		dst = append(dst, `,"content":[`...)
		dst = r.appendAnthropicToolUse(dst, true)
		dst = append(dst, `],"stop_reason":"tool_use","stop_sequence":null`...)
	} else if final {
		dst = append(dst, `,"content":[{"type":"text","text":`...)
		dst = append(dst, r.beh.textJSON...)
		dst = append(dst, `}],"stop_reason":"end_turn","stop_sequence":null`...)
	} else {
		dst = append(dst, `,"content":[],"stop_reason":null,"stop_sequence":null`...)
	}
	dst = append(dst, `,"usage":{"input_tokens":`...)
	dst = appendInt(dst, int64(r.p))
	dst = append(dst, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":`...)
	if final {
		dst = appendInt(dst, int64(r.c))
	} else {
		dst = append(dst, '1')
	}
	return append(dst, `}}`...)
}

// messagesStream renders message_start, content_block_start, ping, the
// text deltas, content_block_stop, message_delta (cumulative output usage)
// and message_stop.
func (r *render) messagesStream() *streamPlan {
	b := &planBuilder{buf: make([]byte, 0, 1024+r.beh.chunks*160)}
	r.messagesOpen(b)
	b.sseEvent("content_block_start")
	b.buf = append(b.buf, `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`...)
	b.closeFrame()
	b.sseEvent("ping")
	b.buf = append(b.buf, `{"type":"ping"}`...)
	b.closeFrame()
	for _, chunk := range r.beh.chunkJSON {
		messagesDelta(b, `{"type":"text_delta","text":`, chunk)
	}
	r.messagesClose(b, "end_turn")
	return &streamPlan{frames: b.frames(), contentStart: 3, contentCount: r.beh.chunks, errFrame: anthropicErrFrame(r.beh.b.Fail)}
}

// messagesDelta renders a content_block_delta of block 0: head opens the
// delta up to its one field's value (text_delta's text, input_json_delta's
// partial_json), v is that value.
func messagesDelta(b *planBuilder, head string, v []byte) {
	b.sseEvent("content_block_delta")
	b.buf = append(b.buf, `{"type":"content_block_delta","index":0,"delta":`...)
	b.buf = append(b.buf, head...)
	b.buf = append(b.buf, v...)
	b.buf = append(b.buf, `}}`...)
	b.closeFrame()
}

// messagesOpen renders message_start.
func (r *render) messagesOpen(b *planBuilder) {
	b.sseEvent("message_start")
	b.buf = append(b.buf, `{"type":"message_start","message":`...)
	b.buf = r.appendMessage(b.buf, false)
	b.buf = append(b.buf, '}')
	b.closeFrame()
}

// messagesClose renders content_block_stop, message_delta (cumulative
// output usage) and message_stop.
func (r *render) messagesClose(b *planBuilder, stop string) {
	b.sseEvent("content_block_stop")
	b.buf = append(b.buf, `{"type":"content_block_stop","index":0}`...)
	b.closeFrame()
	b.sseEvent("message_delta")
	b.buf = append(b.buf, `{"type":"message_delta","delta":{"stop_reason":"`...)
	b.buf = append(b.buf, stop...)
	b.buf = append(b.buf, `","stop_sequence":null},"usage":{"output_tokens":`...)
	b.buf = appendInt(b.buf, int64(r.c))
	b.buf = append(b.buf, `}}`...)
	b.closeFrame()
	b.sseEvent("message_stop")
	b.buf = append(b.buf, `{"type":"message_stop"}`...)
	b.closeFrame()
}

func anthropicErrFrame(fail FailSpec) func(int) []byte {
	return func(int) []byte {
		out := append([]byte(nil), "event: error\ndata: "...)
		out = appendAnthropicError(out, streamErrInfo(fail))
		return append(out, "\n\n"...)
	}
}
