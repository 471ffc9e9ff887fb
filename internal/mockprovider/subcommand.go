package mockprovider

import "os"

// RunIfSubcommand turns the process into the mock when its first argument
// is "mockprovider", exiting with Main's status; otherwise it returns at
// once. The gateway supervises the bundled mock as the service command
// "{self} mockprovider --listen ..."; a test binary that runs a gateway on
// the embedded default calls this first in TestMain so that "{self}" (the
// test binary) answers that command as the real binary does.
func RunIfSubcommand() {
	if len(os.Args) > 1 && os.Args[1] == "mockprovider" {
		os.Exit(Main(os.Args[2:]))
	}
}
