package mockprovider

import (
	"strconv"

	"github.com/omniroute/gateway/internal/apierror"
)

// appendJSONString appends s as a JSON string literal without allocating
// (the gateway's own encoder, also used for its error bodies).
func appendJSONString(dst []byte, s string) []byte { return apierror.AppendString(dst, s) }

func appendInt(dst []byte, v int64) []byte { return strconv.AppendInt(dst, v, 10) }
