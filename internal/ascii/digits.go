package ascii

// ParseDigits returns the number b spells in decimal: b must be a
// non-empty run of ASCII digits (no sign, no space, no underscore), its
// value at most the largest int64. Header values, cgroup files, config
// numbers and timestamps' fields are read this way on paths where
// strconv's string conversion would allocate; each caller trims, takes a
// sign and bounds the length or value as its own format says, and words
// its own error.
func ParseDigits(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (1<<63-1-d)/10 {
			return 0, false // past the largest int64
		}
		n = n*10 + d
	}
	return n, true
}
