package mockprovider

// OpenAI embeddings (POST /v1/embeddings): deterministic vectors, so a
// test can check that a client got exactly what the provider sent.

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"strconv"
)

// DefaultEmbeddingDims is the vector length when a request sets no
// dimensions.
const DefaultEmbeddingDims = 8

// maxEmbeddingDims bounds dimensions (OpenAI's largest model has 3072).
const maxEmbeddingDims = 4096

// embeddingsRequest is what the mock reads of an embeddings request.
type embeddingsRequest struct {
	inputs  []json.RawMessage // one per vector: a string or an array of token ids
	dims    int
	base64  bool
	nTokens int
}

// parseEmbeddings validates an embeddings request as the OpenAI API does:
// input a non-empty string or array (of strings, of token ids, or of
// arrays of token ids), encoding_format float or base64, dimensions a
// positive integer.
func parseEmbeddings(body []byte) (*embeddingsRequest, error) {
	var raw struct {
		Input          json.RawMessage `json:"input"`
		EncodingFormat string          `json:"encoding_format"`
		Dimensions     *int            `json:"dimensions"`
	}
	q := &embeddingsRequest{}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, err
	}
	q.dims = DefaultEmbeddingDims
	if raw.Dimensions != nil {
		if *raw.Dimensions < 1 || *raw.Dimensions > maxEmbeddingDims {
			return nil, errors.New("dimensions must be between 1 and " + strconv.Itoa(maxEmbeddingDims))
		}
		q.dims = *raw.Dimensions
	}
	switch raw.EncodingFormat {
	case "", "float":
	case "base64":
		q.base64 = true
	default:
		return nil, errors.New("encoding_format must be float or base64")
	}
	var s string
	if json.Unmarshal(raw.Input, &s) == nil {
		if s == "" {
			return nil, errors.New("input must not be empty")
		}
		q.inputs, q.nTokens = []json.RawMessage{raw.Input}, (len(s)+3)/4
		return q, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw.Input, &items) != nil || len(items) == 0 {
		return nil, errors.New("input must be a non-empty string or array")
	}
	var ids []int64
	if json.Unmarshal(raw.Input, &ids) == nil { // one input of token ids
		q.inputs, q.nTokens = []json.RawMessage{raw.Input}, len(ids)
		return q, nil
	}
	for _, it := range items {
		switch {
		case json.Unmarshal(it, &s) == nil && s != "":
			q.nTokens += (len(s) + 3) / 4
		case json.Unmarshal(it, &ids) == nil && len(ids) > 0:
			q.nTokens += len(ids)
		default:
			return nil, errors.New("each input must be a non-empty string or array of token ids")
		}
	}
	q.inputs = items
	return q, nil
}

// EmbeddingVector is the vector the mock answers for one input (its JSON
// text as sent, e.g. `"hello"`): dims numbers derived from SHA-256 of the
// input and the position, scaled to unit length.
func EmbeddingVector(input []byte, dims int) []float32 {
	v := make([]float32, dims)
	var norm float64
	for i := range v {
		h := sha256.New()
		h.Write(input)
		var idx [4]byte
		binary.LittleEndian.PutUint32(idx[:], uint32(i))
		h.Write(idx[:])
		x := float64(binary.LittleEndian.Uint32(h.Sum(nil)))/math.MaxUint32*2 - 1
		v[i] = float32(x)
		norm += x * x
	}
	if norm > 0 {
		n := math.Sqrt(norm)
		for i := range v {
			v[i] = float32(float64(v[i]) / n)
		}
	}
	return v
}

// appendEmbeddings renders the answer: one embedding per input, in order,
// then the model and usage.
func appendEmbeddings(dst []byte, q *embeddingsRequest, modelRaw []byte) []byte {
	dst = append(dst, `{"object":"list","data":[`...)
	for i, in := range q.inputs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"object":"embedding","index":`...)
		dst = strconv.AppendInt(dst, int64(i), 10)
		dst = append(dst, `,"embedding":`...)
		v := EmbeddingVector(in, q.dims)
		if q.base64 {
			b := make([]byte, 4*len(v))
			for j, f := range v {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(f))
			}
			dst = append(dst, '"')
			dst = base64.StdEncoding.AppendEncode(dst, b)
			dst = append(dst, '"')
		} else {
			dst = append(dst, '[')
			for j, f := range v {
				if j > 0 {
					dst = append(dst, ',')
				}
				dst = strconv.AppendFloat(dst, float64(f), 'g', -1, 32)
			}
			dst = append(dst, ']')
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `],"model":`...)
	dst = append(dst, modelRaw...)
	dst = append(dst, `,"usage":{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, int64(q.nTokens), 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, int64(q.nTokens), 10)
	return append(dst, `}}`...)
}
