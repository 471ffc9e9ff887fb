package main

import (
	"os"
	"strings"
	"testing"
)

// OmniRoute read OMNIROUTE_CHAT_MAX_HEAVY_IN_FLIGHT=0 or garbage as 1;
// here such a value stops start-up with a message saying what to set.
func TestInvalidAdmissionSettingsStopStartup(t *testing.T) {
	for _, tc := range []struct{ key, val, want string }{
		{"OMNIROUTE_CHAT_MAX_HEAVY_IN_FLIGHT", "0", `cannot parse OMNIROUTE_CHAT_MAX_HEAVY_IN_FLIGHT="0": want a positive integer (1 or more), or leave it unset for no count cap`},
		{"OMNIROUTE_CHAT_MAX_HEAVY_IN_FLIGHT", "lots", `cannot parse OMNIROUTE_CHAT_MAX_HEAVY_IN_FLIGHT="lots"`},
		{"OMNIROUTE_CHAT_MAX_INFLIGHT_BYTES", "0", "OMNIROUTE_CHAT_MAX_INFLIGHT_BYTES=0 is not a budget"},
		{"OMNIROUTE_PRESSURE_PSI_SOURCE", "sometimes", `cannot parse OMNIROUTE_PRESSURE_PSI_SOURCE="sometimes"`},
	} {
		env := baseEnv(t)
		env[tc.key] = tc.val
		var out, errOut syncBuffer
		if c := run(nil, env, &out, &errOut, make(chan os.Signal)); c != 2 || !strings.Contains(errOut.String(), tc.want) {
			t.Fatalf("%s=%s: exit %d stderr %q; want 2 and %q", tc.key, tc.val, c, errOut.String(), tc.want)
		}
	}
}
