// Package tenant turns a caller's API key into an opaque, stable tenant id
// without ever keeping the key: id = "key_" + the first 16 hex digits of
// HMAC-SHA256(install secret, SHA-256(key)). The install secret keeps ids
// from being linkable across installs; hashing the key first lets tenants be
// configured by the key's SHA-256 alone, so no file ever holds a key.
package tenant

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// IDLen is the length of an id ("key_" + 16 hex).
const IDLen = 20

// ID is an opaque tenant id. It is a fixed array so it can be a map key and
// be passed around without allocating.
type ID [IDLen]byte

// Anonymous is the tenant of callers that send no key.
var Anonymous = ID{'a', 'n', 'o', 'n', 'y', 'm', 'o', 'u', 's'}

// String returns the id text.
func (id ID) String() string {
	n := IDLen
	for n > 0 && id[n-1] == 0 {
		n--
	}
	return string(id[:n])
}

// Bytes returns the id text as a slice of id itself (no copy, no
// allocation): for callers that copy it, such as the request log.
func (id *ID) Bytes() []byte {
	n := IDLen
	for n > 0 && id[n-1] == 0 {
		n--
	}
	return id[:n]
}

// IsZero reports whether id is unset.
func (id ID) IsZero() bool { return id == ID{} }

// Tenant is a configured caller.
type Tenant struct {
	ID   ID
	Name string
}

// Mode is the auth mode (see config.Auth).
type Mode uint8

// Modes.
const (
	ModeKeys Mode = iota
	ModeLoopback
	ModeOpen
)

// ParseMode maps the config name.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "keys":
		return ModeKeys, nil
	case "loopback":
		return ModeLoopback, nil
	case "open":
		return ModeOpen, nil
	}
	return 0, fmt.Errorf("unknown auth mode %q", s)
}

// Decision is the outcome of identifying a caller.
type Decision uint8

// Decisions.
const (
	Allowed Decision = iota
	MissingKey
	InvalidKey
	// Retired: the key was issued at run time and has since been revoked
	// or rotated away. The resolver never decides it; the key snapshot
	// (internal/keys) does, before the resolver is asked.
	Retired
)

// Resolver identifies callers. It is safe for concurrent use.
type Resolver struct {
	secret         []byte
	known          map[ID]*Tenant
	mode           Mode
	allowAnonymous bool
	macs           sync.Pool
}

// Spec is a configured tenant: its name and the SHA-256 of its key.
type Spec struct {
	Name      string
	KeySHA256 [32]byte
}

// NewResolver builds a resolver. secret must be at least 16 bytes.
func NewResolver(secret []byte, mode Mode, allowAnonymous bool, tenants []Spec) (*Resolver, error) {
	if len(secret) < 16 {
		return nil, errors.New("tenant secret must be at least 16 bytes")
	}
	r := &Resolver{secret: append([]byte(nil), secret...), known: map[ID]*Tenant{}, mode: mode, allowAnonymous: allowAnonymous}
	r.macs.New = func() any { return &macState{h: hmac.New(sha256.New, r.secret)} }
	for _, s := range tenants {
		id := r.idFromDigest(s.KeySHA256)
		if prev, dup := r.known[id]; dup {
			return nil, fmt.Errorf("tenants %q and %q have the same key; give each tenant its own key", prev.Name, s.Name)
		}
		r.known[id] = &Tenant{ID: id, Name: s.Name}
	}
	return r, nil
}

// macState is pooled with its buffers so hashing a key allocates nothing
// (slices of stack arrays passed to hash.Hash methods would escape).
type macState struct {
	h   hash.Hash
	in  [32]byte
	out [32]byte
}

func (r *Resolver) idFromDigest(d [32]byte) ID {
	m := r.macs.Get().(*macState)
	m.in = d
	m.h.Reset()
	m.h.Write(m.in[:])
	m.h.Sum(m.out[:0])
	var id ID
	copy(id[:], "key_")
	hex.Encode(id[4:], m.out[:8])
	r.macs.Put(m)
	return id
}

// IDForDigest returns the id of the key whose SHA-256 is d: the same
// derivation as configured tenants', so keys issued at run time (stored as
// their SHA-256) and config-file tenants share one id space.
func (r *Resolver) IDForDigest(d [32]byte) ID { return r.idFromDigest(d) }

// IDForKey returns the id a key maps to (whether or not it is configured).
func (r *Resolver) IDForKey(key []byte) ID { return r.idFromDigest(sha256.Sum256(key)) }

// Identify decides whether a caller with credential key (nil/empty when
// none was sent) from a loopback peer or not may proceed, and as whom.
// t is non-nil for configured tenants.
func (r *Resolver) Identify(key []byte, loopback bool) (ID, *Tenant, Decision) {
	if len(key) == 0 {
		if r.allowAnonymous && (r.mode != ModeLoopback || loopback) {
			return Anonymous, nil, Allowed
		}
		return ID{}, nil, MissingKey
	}
	return r.IdentifyID(r.IDForKey(key), loopback)
}

// IdentifyID is Identify for a caller that sent a key whose id is already
// known (IDForDigest of its SHA-256).
func (r *Resolver) IdentifyID(id ID, loopback bool) (ID, *Tenant, Decision) {
	if t := r.known[id]; t != nil {
		return id, t, Allowed
	}
	switch {
	case r.mode == ModeOpen, r.mode == ModeLoopback && loopback:
		return id, nil, Allowed
	}
	return ID{}, nil, InvalidKey
}

// Tenants lists configured tenants.
func (r *Resolver) Tenants() []*Tenant {
	out := make([]*Tenant, 0, len(r.known))
	for _, t := range r.known {
		out = append(out, t)
	}
	return out
}

// LoadOrCreateSecret returns the install secret: from value when set, else
// from <dir>/tenant-secret, creating it (32 random bytes, hex, mode 0600) on
// first start. An existing file that other users may read or write is
// refused: with the secret, anyone can compute every tenant's id.
func LoadOrCreateSecret(value, dir string) ([]byte, error) {
	if value != "" {
		return []byte(value), nil
	}
	path := filepath.Join(dir, "tenant-secret")
	if b, err := os.ReadFile(path); err == nil {
		if err := checkPrivate(path); err != nil {
			return nil, err
		}
		s := strings.TrimSpace(string(b))
		if len(s) < 16 {
			return nil, fmt.Errorf("install secret %s is shorter than 16 characters; delete it to have a new one generated (tenant ids will change)", path)
		}
		return []byte(s), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cannot read install secret: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create data directory for the install secret (set OMNIROUTE_DATA_DIR or OMNIROUTE_TENANT_SECRET): %w", err)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, fmt.Errorf("cannot generate install secret: %w", err)
	}
	s := hex.EncodeToString(raw[:])
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return LoadOrCreateSecret("", dir) // another process won the race
	}
	if err != nil {
		return nil, fmt.Errorf("cannot write install secret: %w", err)
	}
	if _, err := f.WriteString(s + "\n"); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot write install secret: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("cannot write install secret: %w", err)
	}
	return []byte(s), nil
}

// checkPrivate refuses a secret file whose mode lets other users read or
// write it (anything beyond 0600), naming the fix.
func checkPrivate(path string) error {
	if runtime.GOOS == "windows" {
		return nil // no Unix modes: the ACLs of the data directory apply
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("cannot check the install secret: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("install secret %s has mode %04o: other users can read or change it, and with it compute every tenant id; run chmod 600 %s (or set OMNIROUTE_TENANT_SECRET) and start again", path, perm, path)
	}
	return nil
}
