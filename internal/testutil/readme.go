package testutil

import (
	"errors"
	"os"
	"strings"
)

// READMEExampleConfig returns the example configuration file of the
// README at path: the JSON block that starts with "providers", which the
// tests that hold the README to its word decode.
func READMEExampleConfig(path string) (string, error) {
	readme, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	const start = "```json\n{\n  \"providers\""
	_, rest, ok := strings.Cut(string(readme), start)
	js, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		return "", errors.New(path + " has no example config block (a ```json block starting with \"providers\")")
	}
	return "{\n  \"providers\"" + js, nil
}

// READMEShellBlock returns the first ```sh block of the README at path
// that follows the heading "## "+section and contains marker: the
// commands a walkthrough tells the reader to run, which a test then runs.
func READMEShellBlock(path, section, marker string) (string, error) {
	readme, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	_, rest, ok := strings.Cut(string(readme), "\n## "+section+"\n")
	if !ok {
		return "", errors.New(path + " has no section \"## " + section + "\"")
	}
	if next := strings.Index(rest, "\n## "); next >= 0 {
		rest = rest[:next]
	}
	for {
		_, block, ok := strings.Cut(rest, "```sh\n")
		if !ok {
			return "", errors.New(path + ", section \"" + section + "\": no ```sh block contains " + marker)
		}
		body, after, ok := strings.Cut(block, "```")
		if !ok {
			return "", errors.New(path + ", section \"" + section + "\": a ```sh block does not end")
		}
		if strings.Contains(body, marker) {
			return body, nil
		}
		rest = after
	}
}
