package config

import "strings"

// Errors is every problem validation found, each message starting with
// the JSON path it is about. Error joins them with "; " (what a start-up
// failure prints); a caller that answers machines (the config reload
// endpoint) lists them one by one with errors.As.
type Errors []string

func (e Errors) Error() string { return strings.Join(e, "; ") }
