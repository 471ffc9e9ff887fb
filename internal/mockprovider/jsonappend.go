package mockprovider

import "strconv"

// appendJSONString appends s as a JSON string literal. It is the
// allocation-free counterpart of json.Marshal(string) for the request path
// (error messages, configured codes); strconv.Quote is not used because Go
// escapes such as \x7f are not valid JSON.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func appendInt(dst []byte, v int64) []byte { return strconv.AppendInt(dst, v, 10) }
