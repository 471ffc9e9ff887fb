//go:build !linux

package mockprovider

import "os/exec"

func setParentDeath(*exec.Cmd) {}
