package pressure

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/omniroute/gateway/internal/ascii"
)

// The parsers below read the kernel's text files. They are pure functions
// of the file content (fuzzed in parse_fuzz_test.go) and never panic: a
// value they cannot read is reported as unknown (-1 or ok=false), because a
// sampler that guesses would turn a parse slip into 503s.

// maxDigits bounds numeric fields; anything longer is not a plausible byte
// count and is treated as unknown rather than overflowing.
const maxDigits = 19

// ParseBytesValue reads a single-value cgroup file such as memory.max,
// memory.current or memory.limit_in_bytes. "max" (no limit) and anything
// that is not a plain non-negative decimal are reported as -1.
func ParseBytesValue(b []byte) int64 {
	s := bytes.TrimSpace(b)
	if len(s) > maxDigits {
		return -1
	}
	n, ok := ascii.ParseDigits(s)
	if !ok {
		return -1
	}
	return n
}

// ParseKeyedValue returns the value of key in a "key value" per line file
// (memory.stat, memory.events, memory.oom_control), or -1 when the key is
// absent or its value is not a non-negative integer.
func ParseKeyedValue(b []byte, key string) int64 {
	for line := range bytes.Lines(b) { // TrimSpace drops the line's '\n'
		k, v, ok := bytes.Cut(bytes.TrimSpace(line), []byte(" "))
		if ok && string(k) == key {
			return ParseBytesValue(v)
		}
	}
	return -1
}

// PSI is one line of a pressure stall file ("some" or "full").
type PSI struct {
	Avg10, Avg60, Avg300 float64
	OK                   bool
}

// ParsePSI reads a /proc/pressure/memory or cgroup memory.pressure file:
//
//	some avg10=0.00 avg60=0.00 avg300=0.00 total=0
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=0
//
// A line that is missing or malformed leaves its PSI with OK false.
// Averages are percentages and must lie in [0, 100].
func ParsePSI(b []byte) (some, full PSI) {
	for line := range bytes.Lines(b) { // Fields drops the line's '\n'
		fields := strings.Fields(string(line))
		if len(fields) < 4 {
			continue
		}
		var p PSI
		got := 0
		for _, f := range fields[1:] {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				continue
			}
			var dst *float64
			switch k {
			case "avg10":
				dst = &p.Avg10
			case "avg60":
				dst = &p.Avg60
			case "avg300":
				dst = &p.Avg300
			default:
				continue
			}
			x, err := strconv.ParseFloat(v, 64)
			if err != nil || !(x >= 0 && x <= 100) {
				got = -100
				continue
			}
			*dst = x
			got++
		}
		p.OK = got == 3
		switch fields[0] {
		case "some":
			some = p
		case "full":
			full = p
		}
	}
	return some, full
}

// ParseMeminfoTotal returns MemTotal from /proc/meminfo in bytes, or -1.
func ParseMeminfoTotal(b []byte) int64 {
	for line := range bytes.Lines(b) { // TrimSpace drops the line's '\n'
		rest, ok := bytes.CutPrefix(line, []byte("MemTotal:"))
		if !ok {
			continue
		}
		rest = bytes.TrimSpace(rest)
		unit := int64(1)
		if r, ok := bytes.CutSuffix(rest, []byte("kB")); ok {
			rest, unit = bytes.TrimSpace(r), 1024
		}
		n := ParseBytesValue(rest)
		if n < 0 || n > (1<<62)/unit {
			return -1
		}
		return n * unit
	}
	return -1
}

// CgroupEntry is one line of /proc/self/cgroup.
type CgroupEntry struct {
	Controllers []string // empty for the unified (v2) hierarchy
	Path        string
}

// ParseProcCgroup reads /proc/self/cgroup ("hierarchy:controllers:path"
// per line). Malformed lines are skipped.
func ParseProcCgroup(b []byte) []CgroupEntry {
	var out []CgroupEntry
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		_, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		ctrl, path, ok := strings.Cut(rest, ":")
		if !ok || !strings.HasPrefix(path, "/") {
			continue
		}
		e := CgroupEntry{Path: path}
		if ctrl != "" {
			e.Controllers = strings.Split(ctrl, ",")
		}
		out = append(out, e)
	}
	return out
}

// Mount is one cgroup mount from /proc/self/mountinfo.
type Mount struct {
	Root       string // the cgroup path the mount shows at its top
	MountPoint string
	FSType     string   // cgroup2 or cgroup
	Options    []string // super options (v1 controllers such as memory)
}

// ParseMountinfo returns the cgroup and cgroup2 mounts of a
// /proc/self/mountinfo file. Octal escapes (\040 for a space) in paths are
// decoded. Malformed lines are skipped.
func ParseMountinfo(b []byte) []Mount {
	var out []Mount
	for _, line := range strings.Split(string(b), "\n") {
		left, right, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		lf := strings.Fields(left)
		rf := strings.Fields(right)
		if len(lf) < 5 || len(rf) < 1 {
			continue
		}
		fstype := rf[0]
		if fstype != "cgroup2" && fstype != "cgroup" {
			continue
		}
		m := Mount{Root: unescapeMount(lf[3]), MountPoint: unescapeMount(lf[4]), FSType: fstype}
		if !strings.HasPrefix(m.MountPoint, "/") {
			continue
		}
		if len(rf) >= 3 {
			m.Options = strings.Split(rf[2], ",")
		}
		out = append(out, m)
	}
	return out
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] >= '0' && s[i+1] <= '3' && isOctal(s[i+2]) && isOctal(s[i+3]) {
			v := (s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0')
			sb.WriteByte(v)
			i += 3
			continue
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// ParseCPUStat reads the machine's CPU time from /proc/stat's first line
// ("cpu user nice system idle iowait irq softirq steal guest guest_nice",
// clock ticks summed over the CPUs): busy is every field but idle and
// iowait (guest time is already in user), total all of them; -1, -1 when
// the line is not there or not numbers.
func ParseCPUStat(b []byte) (busy, total int64) {
	line := b
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		line = b[:i]
	}
	f := bytes.Fields(line)
	if len(f) < 5 || string(f[0]) != "cpu" {
		return -1, -1
	}
	for i, x := range f[1:min(len(f), 9)] {
		v, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil || v < 0 {
			return -1, -1
		}
		total += v
		if i != 3 && i != 4 {
			busy += v
		}
	}
	return busy, total
}
