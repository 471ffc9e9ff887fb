package limits

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/tenant"
)

// The config file's tenants turned into what identify authenticates
// against (Stage.Identify's resolver), at start-up and at every reload:
// here beside ConfigTenants, which reads the same tenants for the keys
// actor, so that one place reads a tenant's key_env or key_sha256
// (KeyDigest).

// Resolver builds the tenant resolver of config file f: its auth mode,
// whether anonymous callers are let in, its tenants' key digests (their
// key_env read through getenv), and the install secret tenant ids derive
// from (env's OMNIROUTE_TENANT_SECRET, else the data directory's
// tenant-secret, created on first start).
func Resolver(f *config.File, env *config.Env, getenv func(string) (string, bool)) (*tenant.Resolver, error) {
	mode, err := tenant.ParseMode(f.AuthMode())
	if err != nil {
		return nil, err
	}
	var specs []tenant.Spec
	for i, t := range f.Tenants {
		d, err := KeyDigest(getenv, i, t)
		if err != nil {
			return nil, err
		}
		specs = append(specs, tenant.Spec{Name: t.Name, KeySHA256: d})
	}
	secret, err := tenant.LoadOrCreateSecret(env.Server.TenantSecret, env.ResolvedDataDir())
	if err != nil {
		return nil, err
	}
	return tenant.NewResolver(secret, mode, f.Auth.AllowAnonymous, specs)
}

// KeyDigest is the SHA-256 of config tenant i's key: from the variable
// key_env names (looked up with getenv), or key_sha256.
func KeyDigest(getenv func(string) (string, bool), i int, t config.Tenant) ([32]byte, error) {
	var d [32]byte
	if t.KeyEnv != "" {
		v, ok := getenv(t.KeyEnv)
		if !ok || v == "" {
			return d, fmt.Errorf("tenants[%d].key_env: environment variable %s is not set; export the tenant's API key there", i, t.KeyEnv)
		}
		return sha256.Sum256([]byte(v)), nil
	}
	if _, err := hex.Decode(d[:], []byte(t.KeySHA256)); err != nil {
		return d, fmt.Errorf("tenants[%d].key_sha256: %v", i, err)
	}
	return d, nil
}
