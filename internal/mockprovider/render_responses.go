package mockprovider

// OpenAI Responses API rendering. Stream frames carry "event: <type>" and a
// data object with the same "type" and a running "sequence_number".

func (r *render) appendRespID(dst []byte) []byte {
	dst = append(dst, `"resp_mock_`...)
	dst = appendInt(dst, int64(r.n))
	return append(dst, '"')
}

func (r *render) appendRespUsage(dst []byte) []byte {
	dst = append(dst, `{"input_tokens":`...)
	dst = appendInt(dst, int64(r.p))
	dst = append(dst, `,"input_tokens_details":{"cached_tokens":`...)
	dst = appendInt(dst, int64(r.cached()))
	dst = append(dst, `},"output_tokens":`...)
	dst = appendInt(dst, int64(r.c))
	dst = append(dst, `,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":`...)
	dst = appendInt(dst, int64(r.p+r.c))
	return append(dst, '}')
}

// appendRespPart renders the output_text content part (empty while it is
// being streamed).
func (r *render) appendRespPart(dst []byte, full bool) []byte {
	dst = append(dst, `{"type":"output_text","text":`...)
	if full {
		dst = append(dst, r.beh.textJSON...)
	} else {
		dst = append(dst, `""`...)
	}
	return append(dst, `,"annotations":[]}`...)
}

// appendRespItem renders the assistant message output item.
func (r *render) appendRespItem(dst []byte, full bool) []byte {
	dst = append(dst, `{"id":`...)
	dst = r.appendMessageID(dst)
	if full {
		dst = append(dst, `,"type":"message","status":"completed","role":"assistant","content":[`...)
		dst = r.appendRespPart(dst, true)
		return append(dst, `]}`...)
	}
	return append(dst, `,"type":"message","status":"in_progress","role":"assistant","content":[]}`...)
}

// appendResponse renders the response object: in_progress with no output
// for the opening events, completed with output and usage otherwise.
func (r *render) appendResponse(dst []byte, completed bool) []byte {
	dst = append(dst, `{"id":`...)
	dst = r.appendRespID(dst)
	dst = append(dst, `,"object":"response","created_at":`...)
	dst = appendInt(dst, r.created)
	if completed {
		dst = append(dst, `,"status":"completed"`...)
	} else {
		dst = append(dst, `,"status":"in_progress"`...)
	}
	dst = append(dst, `,"error":null,"incomplete_details":null,"instructions":null,"model":`...)
	dst = append(dst, r.modelRaw...)
	dst = append(dst, `,"output":[`...)
	if completed {
		dst = r.appendOutputItem(dst, true)
	}
	dst = append(dst, `],"parallel_tool_calls":true,"tool_choice":"auto","tools":[],"usage":`...)
	if completed {
		dst = r.appendRespUsage(dst)
	} else {
		dst = append(dst, "null"...)
	}
	return append(dst, '}')
}

// respEvent opens a typed event frame up to the first field after
// sequence_number.
func respEvent(b *planBuilder, typ string) {
	b.sseEvent(typ)
	b.buf = append(b.buf, `{"type":"`...)
	b.buf = append(b.buf, typ...)
	b.buf = append(b.buf, `","sequence_number":`...)
	b.buf = appendInt(b.buf, int64(len(b.ends)))
}

// appendOutputItem appends the answer's one output item: its function
// call when the behaviour calls a tool, else its message.
func (r *render) appendOutputItem(dst []byte, done bool) []byte {
	if r.tool != nil {
		return r.appendRespToolItem(dst, done)
	}
	return r.appendRespItem(dst, done)
}

// respItemEvent renders response.output_item.added (done false) or
// response.output_item.done with the output item.
func (r *render) respItemEvent(b *planBuilder, done bool) {
	typ := "response.output_item.added"
	if done {
		typ = "response.output_item.done"
	}
	respEvent(b, typ)
	b.buf = append(b.buf, `,"output_index":0,"item":`...)
	b.buf = r.appendOutputItem(b.buf, done)
	b.buf = append(b.buf, '}')
	b.closeFrame()
}

// respPartEvent renders response.content_part.added (done false) or
// response.content_part.done with the message's text part.
func (r *render) respPartEvent(b *planBuilder, done bool) {
	typ := "response.content_part.added"
	if done {
		typ = "response.content_part.done"
	}
	respEvent(b, typ)
	r.respPartRef(b)
	b.buf = append(b.buf, `,"part":`...)
	b.buf = r.appendRespPart(b.buf, done)
	b.buf = append(b.buf, '}')
	b.closeFrame()
}

// respPartRef appends the item/output/content indices shared by part events.
func (r *render) respPartRef(b *planBuilder) {
	b.buf = append(b.buf, `,"item_id":`...)
	b.buf = r.appendMessageID(b.buf)
	b.buf = append(b.buf, `,"output_index":0,"content_index":0`...)
}

func (r *render) responsesStream() *streamPlan {
	b := &planBuilder{buf: make([]byte, 0, 2048+r.beh.chunks*192)}
	r.responsesOpen(b)
	r.respItemEvent(b, false)
	r.respPartEvent(b, false)
	for _, chunk := range r.beh.chunkJSON {
		respEvent(b, "response.output_text.delta")
		r.respPartRef(b)
		b.buf = append(b.buf, `,"delta":`...)
		b.buf = append(b.buf, chunk...)
		b.buf = append(b.buf, `,"logprobs":[]}`...)
		b.closeFrame()
	}
	respEvent(b, "response.output_text.done")
	r.respPartRef(b)
	b.buf = append(b.buf, `,"text":`...)
	b.buf = append(b.buf, r.beh.textJSON...)
	b.buf = append(b.buf, `,"logprobs":[]}`...)
	b.closeFrame()
	r.respPartEvent(b, true)
	r.respItemEvent(b, true)
	r.responsesClose(b)
	return &streamPlan{frames: b.frames(), contentStart: 4, contentCount: r.beh.chunks, errFrame: responsesErrFrame(r.beh.b.Fail)}
}

// responsesOpen renders response.created and response.in_progress.
func (r *render) responsesOpen(b *planBuilder) {
	for _, typ := range [...]string{"response.created", "response.in_progress"} {
		respEvent(b, typ)
		b.buf = append(b.buf, `,"response":`...)
		b.buf = r.appendResponse(b.buf, false)
		b.buf = append(b.buf, '}')
		b.closeFrame()
	}
}

// responsesClose renders response.completed.
func (r *render) responsesClose(b *planBuilder) {
	respEvent(b, "response.completed")
	b.buf = append(b.buf, `,"response":`...)
	b.buf = r.appendResponse(b.buf, true)
	b.buf = append(b.buf, '}')
	b.closeFrame()
}

func responsesErrFrame(fail FailSpec) func(int) []byte {
	return func(sent int) []byte {
		e := streamErrInfo(fail)
		_, code := openAIErrorKind(e.status, e.code)
		out := append([]byte(nil), `event: error`+"\n"+`data: {"type":"error","sequence_number":`...)
		out = appendInt(out, int64(sent))
		out = append(out, `,"code":`...)
		out = appendJSONString(out, code)
		out = append(out, `,"message":`...)
		out = appendJSONString(out, e.msg)
		return append(out, ",\"param\":null}\n\n"...)
	}
}
