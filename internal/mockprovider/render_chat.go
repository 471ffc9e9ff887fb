package mockprovider

// OpenAI Chat Completions rendering. The shapes follow the real API closely
// enough for openai-go's decoder and ChatCompletionAccumulator.

func (r *render) appendChatID(dst []byte) []byte {
	dst = append(dst, `"chatcmpl-mock-`...)
	dst = appendInt(dst, int64(r.n))
	return append(dst, '"')
}

func (r *render) appendChatUsage(dst []byte) []byte {
	dst = append(dst, `{"prompt_tokens":`...)
	dst = appendInt(dst, int64(r.p))
	dst = append(dst, `,"completion_tokens":`...)
	dst = appendInt(dst, int64(r.c))
	dst = append(dst, `,"total_tokens":`...)
	dst = appendInt(dst, int64(r.p+r.c))
	if n := r.cached(); n > 0 {
		dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
		dst = appendInt(dst, int64(n))
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// appendChatCompletion renders the non-stream chat.completion object.
func (r *render) appendChatCompletion(dst []byte) []byte {
	dst = append(dst, `{"id":`...)
	dst = r.appendChatID(dst)
	dst = append(dst, `,"object":"chat.completion","created":`...)
	dst = appendInt(dst, r.created)
	dst = append(dst, `,"model":`...)
	dst = append(dst, r.modelRaw...)
	dst = append(dst, `,"choices":[{"index":0,"message":{"role":"assistant",`...)
	if r.tool != nil {
		dst = r.appendChatToolCalls(dst)
		dst = append(dst, `},"finish_reason":"tool_calls","logprobs":null}],"usage":`...)
	} else {
		dst = append(dst, `"content":`...)
		dst = append(dst, r.beh.textJSON...)
		dst = append(dst, `,"refusal":null},"finish_reason":"stop","logprobs":null}],"usage":`...)
	}
	dst = r.appendChatUsage(dst)
	return append(dst, '}')
}

// chatChunk opens a "data: " chat.completion.chunk frame up to "choices":.
func (r *render) chatChunk(b *planBuilder) {
	b.buf = append(b.buf, `data: {"id":`...)
	b.buf = r.appendChatID(b.buf)
	b.buf = append(b.buf, `,"object":"chat.completion.chunk","created":`...)
	b.buf = appendInt(b.buf, r.created)
	b.buf = append(b.buf, `,"model":`...)
	b.buf = append(b.buf, r.modelRaw...)
	b.buf = append(b.buf, `,"choices":`...)
}

// chatChunkEnd closes a chunk; with include_usage every chunk but the usage
// chunk carries "usage":null, as the real API does.
func (r *render) chatChunkEnd(b *planBuilder) {
	if r.includeUsage {
		b.buf = append(b.buf, `,"usage":null`...)
	}
	b.buf = append(b.buf, "}\n\n"...)
	b.end()
}

// chatStream renders role delta, content deltas, the finish chunk, the usage
// chunk (include_usage only) and [DONE].
func (r *render) chatStream() *streamPlan {
	b := &planBuilder{buf: make([]byte, 0, 512+r.beh.chunks*256)}
	r.chatChunk(b)
	b.buf = append(b.buf, `[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null,"logprobs":null}]`...)
	r.chatChunkEnd(b)
	for _, chunk := range r.beh.chunkJSON {
		r.chatChunk(b)
		b.buf = append(b.buf, `[{"index":0,"delta":{"content":`...)
		b.buf = append(b.buf, chunk...)
		b.buf = append(b.buf, `},"finish_reason":null,"logprobs":null}]`...)
		r.chatChunkEnd(b)
	}
	r.chatClose(b, "stop")
	return &streamPlan{frames: b.frames(), contentStart: 1, contentCount: r.beh.chunks, errFrame: chatErrFrame(r.beh.b.Fail)}
}

// chatClose renders the finish chunk, the usage chunk (include_usage
// only) and [DONE].
func (r *render) chatClose(b *planBuilder, finish string) {
	r.chatChunk(b)
	b.buf = append(b.buf, `[{"index":0,"delta":{},"finish_reason":"`...)
	b.buf = append(b.buf, finish...)
	b.buf = append(b.buf, `","logprobs":null}]`...)
	r.chatChunkEnd(b)
	if r.includeUsage {
		r.chatChunk(b)
		b.buf = append(b.buf, `[],"usage":`...)
		b.buf = r.appendChatUsage(b.buf)
		b.buf = append(b.buf, "}\n\n"...)
		b.end()
	}
	b.buf = append(b.buf, "data: [DONE]\n\n"...)
	b.end()
}

// chatErrFrame renders the in-band error of error_event mode: openai-go
// ends a stream with an error on a data object whose top-level key is
// "error"; there is no [DONE] after it.
func chatErrFrame(fail FailSpec) func(int) []byte {
	return func(int) []byte {
		out := append([]byte(nil), `data: {"error":`...)
		out = appendOpenAIErrorObject(out, streamErrInfo(fail))
		return append(out, "}\n\n"...)
	}
}

// streamErrInfo is the error carried by an error_event; 529 by default
// (overloaded, the typical mid-stream failure).
func streamErrInfo(f FailSpec) errInfo {
	status := f.Status
	if status == 0 {
		status = 529
	}
	return errInfo{status: status, code: f.Code, msg: statusMessage(status)}
}
