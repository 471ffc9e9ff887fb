// Command mockprovider runs the controllable mock LLM provider used by the
// gateway's tests, benchmark and demo mode. See package
// github.com/omniroute/gateway/internal/mockprovider for flags and the
// admin API.
package main

import (
	"os"

	"github.com/omniroute/gateway/internal/mockprovider"
)

func main() {
	os.Exit(mockprovider.Main(os.Args[1:]))
}
