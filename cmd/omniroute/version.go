package main

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// versionText is what `omniroute version` prints: the release version
// (set with -ldflags "-X main.version=…", else the module version the
// binary was built at), the module path, and the VCS revision, time and
// dirty flag Go stamped into the binary (go build -buildvcs, the default
// in a git checkout). A binary built without VCS data says so instead of
// guessing.
func versionText(bi *debug.BuildInfo, ok bool, ldflagVersion string) string {
	var b strings.Builder
	v := ldflagVersion
	if !ok || bi == nil {
		fmt.Fprintf(&b, "omniroute %s\nbuild info: unavailable (binary built without module support)\n", v)
		return b.String()
	}
	if v == "" || v == "dev" {
		if mv := bi.Main.Version; mv != "" && mv != "(devel)" {
			v = mv
		} else {
			v = "dev"
		}
	}
	fmt.Fprintf(&b, "omniroute %s\n", v)
	mv := bi.Main.Version
	if mv == "" {
		mv = "(devel)"
	}
	fmt.Fprintf(&b, "module: %s %s\n", bi.Main.Path, mv)
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		dirty := ""
		if settings["vcs.modified"] == "true" {
			dirty = " (modified)"
		}
		fmt.Fprintf(&b, "revision: %s%s\n", rev, dirty)
		if at := settings["vcs.time"]; at != "" {
			fmt.Fprintf(&b, "commit time: %s\n", at)
		}
	} else {
		b.WriteString("revision: unknown (built without VCS stamping: outside a git checkout, with -buildvcs=false, or by go run/go test)\n")
	}
	fmt.Fprintf(&b, "go: %s\n", bi.GoVersion)
	return b.String()
}

// releaseVersion is the version the gateway reports (health's version):
// the -ldflags one, else the module version, else "dev".
func releaseVersion() string {
	bi, ok := debug.ReadBuildInfo()
	return strings.TrimPrefix(strings.SplitN(versionText(bi, ok, version), "\n", 2)[0], "omniroute ")
}
