package transport

import (
	"io"

	"github.com/omniroute/gateway/internal/config"
)

// The configuration types, re-exported so that a host in another module can
// build a gateway: Go's internal/ rule keeps internal/config itself private.
type (
	// Env is every OMNIROUTE_* environment setting.
	Env = config.Env
	// File is the JSON configuration (providers, models, tenants, auth).
	File = config.File
)

// LoadEnv parses and validates environment settings from environ (nil means
// the process environment).
func LoadEnv(environ map[string]string) (Env, error) { return config.LoadEnv(environ) }

// ReadConfig loads and validates the JSON configuration file at path.
func ReadConfig(path string) (*File, error) { return config.ReadFile(path) }

// DecodeConfig decodes and validates a JSON configuration.
func DecodeConfig(r io.Reader) (*File, error) { return config.DecodeFile(r) }

// DefaultConfig returns the embedded default configuration (model "demo"
// served by a service named "mockprovider").
func DefaultConfig() (*File, error) { return config.DefaultFile() }
