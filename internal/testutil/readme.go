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
