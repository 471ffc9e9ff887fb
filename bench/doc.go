// Package bench is the load benchmark: it measures the gateway side by side
// with the mock provider reached directly and with a minimal fasthttp reverse
// proxy (package refproxy), the ceiling any gateway on the same machine can
// approach.
package bench
