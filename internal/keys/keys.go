// Package keys holds the pure parts of API keys issued at run time:
// generating a secret, hashing it, validating names and create bodies, and
// the published snapshot the request path authenticates against.
//
// A secret is shown once, when it is created or rotated; only its SHA-256
// is kept (the same form as a config-file tenant's key_sha256). A key's
// tenant id is derived from its first secret by internal/tenant, as for
// config-file tenants, and stays the same across rotations so its usage and
// limits carry on.
package keys

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"time"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/internal/tenantpolicy"
)

// SecretPrefix starts every generated secret, so a leaked one is easy to
// recognise (and to scan for).
const SecretPrefix = "sk-omni-"

// GenerateSecret returns a new secret: SecretPrefix and 32 random bytes
// in hex.
func GenerateSecret() (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("cannot generate a key secret: %w", err)
	}
	return SecretPrefix + hex.EncodeToString(raw[:]), nil
}

// Digest is a secret's SHA-256.
func Digest(secret []byte) [32]byte { return sha256.Sum256(secret) }

// HashHex is the stored form of a secret's digest.
func HashHex(d [32]byte) string { return hex.EncodeToString(d[:]) }

// nameRE is the name's characters; its length (1 to 64) is checked apart,
// as in internal/config: written as `{0,63}`, the pattern held 26 KB of
// compiled program for the life of the process.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// ValidateName checks a key name (the same rule as config tenant names).
func ValidateName(name string) error {
	if len(name) > 64 || !nameRE.MatchString(name) {
		return NewError(apierror.CodeInvalidKeyName, "name", name)
	}
	return nil
}

// Error is a refused key operation, for the management API: a status, a
// machine-readable code and the field to blame (when one is).
type Error struct {
	Status  int
	Code    string
	Field   string
	Message string
}

// NewError is the key API's error of code c (its status and code from
// the table of error codes), blaming field ("" for none), its message
// the table's, filled in with args.
func NewError(c apierror.Code, field string, args ...any) *Error {
	a := apierror.New(c, args...)
	return &Error{Status: a.Status, Code: a.Code, Field: field, Message: a.Message}
}

func (e *Error) Error() string {
	if e.Field != "" {
		return e.Field + ": " + e.Message
	}
	return e.Message
}

// CreateBody is POST /api/keys: a name and the policy fields, flat, as a
// config-file tenant entry has them.
type CreateBody struct {
	Name string `json:"name"`
	tenantpolicy.Policy
}

// DecodeCreate reads a create body strictly. Errors are *Error naming the
// field.
func DecodeCreate(body []byte) (string, tenantpolicy.Policy, error) {
	var b CreateBody
	if err := tenantpolicy.DecodeStrict(body, &b); err != nil {
		return "", tenantpolicy.Policy{}, policyError(err)
	}
	if err := ValidateName(b.Name); err != nil {
		return "", tenantpolicy.Policy{}, err
	}
	if err := b.Policy.Validate(""); err != nil {
		return "", tenantpolicy.Policy{}, policyError(err)
	}
	return b.Name, b.Policy, nil
}

// DecodePolicy reads a policy body (PUT /api/keys/{name}/policy) strictly.
func DecodePolicy(body []byte) (tenantpolicy.Policy, error) {
	p, err := tenantpolicy.Decode(body)
	if err != nil {
		return p, policyError(err)
	}
	return p, nil
}

// policyError turns a tenantpolicy error into a 400 naming the first field.
func policyError(err error) error {
	e := NewError(apierror.CodeInvalidPolicy, "", err.Error())
	switch v := err.(type) {
	case tenantpolicy.FieldError:
		e.Field = v.Path
	case tenantpolicy.Errors:
		e.Field = v[0].Path
	}
	return e
}

// Source says where a tenant comes from.
type Source string

// Sources.
const (
	FromConfig Source = "config" // read-only: edit the config file
	FromStore  Source = "store"
)

// Entry is an active key as the request path sees it.
type Entry struct {
	Name     string
	TenantID tenant.ID
	Policy   *tenantpolicy.Policy
	Source   Source
}

// Info describes a key for listing; it never holds a secret.
type Info struct {
	Name      string              `json:"name"`
	TenantID  string              `json:"tenantId"`
	Source    Source              `json:"source"`
	Policy    tenantpolicy.Policy `json:"policy"`
	CreatedAt *time.Time          `json:"createdAt,omitempty"`
	RotatedAt *time.Time          `json:"rotatedAt,omitempty"`
	RevokedAt *time.Time          `json:"revokedAt,omitempty"`
	// KeySHA256Prefix is the first 8 hex digits of the current secret's
	// hash, enough to tell keys apart and useless to an attacker.
	KeySHA256Prefix string `json:"keySha256Prefix"`
}

// Snapshot is the immutable published key set: active keys by digest for
// the request path, and every key's description for listing.
type Snapshot struct {
	byDigest map[[32]byte]*Entry
	infos    []Info
	// retired are the tenant ids of every stored key: a secret that is not
	// active but maps to one of them is a rotated-away or revoked secret
	// of that key, refused even where unknown keys are let in (auth modes
	// loopback and open).
	retired map[tenant.ID]string
}

// Key is one key for Build.
type Key struct {
	Info
	Digest [32]byte
	ID     tenant.ID
}

// Build makes a snapshot. Revoked keys are listed but do not authenticate.
func Build(keys []Key) *Snapshot {
	s := &Snapshot{byDigest: make(map[[32]byte]*Entry, len(keys)), infos: make([]Info, 0, len(keys)), retired: map[tenant.ID]string{}}
	for i := range keys {
		k := &keys[i]
		s.infos = append(s.infos, k.Info)
		if k.Source == FromStore {
			s.retired[k.ID] = k.Name
		}
		if k.RevokedAt != nil {
			s.revoked(k.Digest)
			continue
		}
		p := k.Policy
		s.byDigest[k.Digest] = &Entry{Name: k.Name, TenantID: k.ID, Policy: &p, Source: k.Source}
	}
	sort.Slice(s.infos, func(i, j int) bool { return s.infos[i].Name < s.infos[j].Name })
	return s
}

// Lookup finds the active key a caller sent. It hashes the key once and
// does not allocate; a miss means the key is unknown or revoked.
func (s *Snapshot) Lookup(key []byte) (*Entry, bool) {
	return s.LookupDigest(sha256.Sum256(key))
}

// revoked marks a revoked key's current secret: its digest maps to no
// entry, and Retired reports it.
func (s *Snapshot) revoked(d [32]byte) {
	if _, ok := s.byDigest[d]; !ok {
		s.byDigest[d] = nil
	}
}

// Retired reports whether a secret that Lookup did not find belongs to a
// stored key all the same: it is the current secret of a revoked key (d),
// or a secret whose tenant id (id, derived from it as for every key) is a
// stored key's, that is the key's first secret after a rotation. The
// request path refuses such a secret with 401 whatever the auth mode. It
// does not allocate.
func (s *Snapshot) Retired(d [32]byte, id tenant.ID) bool {
	if e, ok := s.byDigest[d]; ok && e == nil {
		return true
	}
	_, ok := s.retired[id]
	return ok
}

// LookupDigest is Lookup for an already computed digest.
func (s *Snapshot) LookupDigest(d [32]byte) (*Entry, bool) {
	e := s.byDigest[d]
	return e, e != nil
}

// Infos lists every key, sorted by name.
func (s *Snapshot) Infos() []Info { return append([]Info(nil), s.infos...) }

// Info returns the description of the key named name.
func (s *Snapshot) Info(name string) (Info, bool) {
	i := sort.Search(len(s.infos), func(i int) bool { return s.infos[i].Name >= name })
	if i < len(s.infos) && s.infos[i].Name == name {
		return s.infos[i], true
	}
	return Info{}, false
}

// Active lists the active keys' tenants (for the limiter's tenant set).
func (s *Snapshot) Active() []*Entry {
	out := make([]*Entry, 0, len(s.byDigest))
	for _, e := range s.byDigest {
		if e != nil {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Shares is what admission and the cluster's grains read of one
// snapshot's tenants: their fair shares (only those other than the
// default) and their policies, by tenant id string. It is derived from a
// snapshot by the keys actor's subscriber (SharesOf, in the composition
// root), never on the keys actor, and published whole. A nil *Shares is
// the empty set.
type Shares struct {
	Weights  map[tenant.ID]int64
	Policies map[string]*tenantpolicy.Policy
}

// SharesOf derives the shares of s's active keys.
func SharesOf(s *Snapshot) *Shares {
	sh := &Shares{Weights: map[tenant.ID]int64{}, Policies: map[string]*tenantpolicy.Policy{}}
	for _, e := range s.byDigest {
		if e == nil {
			continue
		}
		if v := e.Policy.EffectiveWeight(); v != tenantpolicy.DefaultWeight {
			sh.Weights[e.TenantID] = v
		}
		sh.Policies[e.TenantID.String()] = e.Policy
	}
	return sh
}

// Weight is tenant id's fair share (tenantpolicy.DefaultWeight unless its
// policy sets one). It does not allocate.
func (sh *Shares) Weight(id tenant.ID) int64 {
	if sh != nil {
		if v, ok := sh.Weights[id]; ok {
			return v
		}
	}
	return tenantpolicy.DefaultWeight
}

// Policy is the active tenant id's policy.
func (sh *Shares) Policy(id string) (*tenantpolicy.Policy, bool) {
	if sh == nil {
		return nil, false
	}
	p, ok := sh.Policies[id]
	return p, ok
}
