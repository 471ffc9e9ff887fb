// Package store is the gateway's persistent state behind two small
// interfaces: KeyStore (API keys issued at run time, stored as hashes) and
// LogStore (the request log and its usage aggregates). The SQLite
// implementation (internal/store/sqlite) keeps both in one file in the
// data directory; the cluster can later back KeyStore with its own store
// while the log stays local.
//
// Nothing secret is stored: a key is its SHA-256, and a request record
// holds ids, names, numbers and the caller's address class, never a
// credential, a prompt or an answer.
package store

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"github.com/omniroute/gateway/internal/pricing"
	"github.com/omniroute/gateway/internal/sanitize"
	"github.com/omniroute/gateway/internal/tenantpolicy"
)

// Errors callers tell apart.
var (
	ErrDuplicateName = errors.New("a key with this name already exists")
	ErrNotFound      = errors.New("no such key")
	ErrRevoked       = errors.New("the key is revoked")
)

// Error is a failure of the database: Error says what failed, on which
// file and what to do (for the gateway's own log and start-up), Public the
// same without where the file is, for answers any management caller reads.
type Error struct {
	Full, Public string
	Err          error
}

func (e *Error) Error() string { return e.Full }
func (e *Error) Unwrap() error { return e.Err }

// PublicMessage is err as an answer may show it: an Error's Public text,
// else err's text as sanitize.Message leaves it (secrets and paths
// redacted, one bounded line), else fallback.
func PublicMessage(err error, fallback string) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Public
	}
	return sanitize.Message(err.Error(), fallback)
}

// Key is one API key issued at run time.
type Key struct {
	Name string
	// TenantID is the tenant the key authenticates as: derived from the
	// key's first secret exactly as internal/tenant derives config-file
	// tenants' ids, and kept across rotations.
	TenantID string
	// KeyHash is the lower-case hex SHA-256 of the current secret.
	KeyHash   string
	Policy    tenantpolicy.Policy
	CreatedAt time.Time
	RotatedAt time.Time // zero: never rotated
	RevokedAt time.Time // zero: active
}

// Revoked reports whether the key no longer authenticates.
func (k *Key) Revoked() bool { return !k.RevokedAt.IsZero() }

// KeyStore persists keys. Implementations are safe for concurrent use.
type KeyStore interface {
	// CreateKey stores a new key; ErrDuplicateName if the name is taken
	// (revoked keys keep their names).
	CreateKey(ctx context.Context, k Key) error
	// Keys lists every key, revoked ones included, by name.
	Keys(ctx context.Context) ([]Key, error)
	// UpdatePolicy replaces a key's policy; ErrNotFound, ErrRevoked.
	UpdatePolicy(ctx context.Context, name string, p tenantpolicy.Policy) error
	// RotateKey replaces a key's hash; ErrNotFound, ErrRevoked.
	RotateKey(ctx context.Context, name, keyHash string, at time.Time) error
	// RevokeKey marks a key revoked; ErrNotFound, ErrRevoked.
	RevokeKey(ctx context.Context, name string, at time.Time) error
}

// IPClass is the class of a caller's address; the address itself is not
// logged.
type IPClass string

// Address classes.
const (
	IPLoopback IPClass = "loopback"
	IPPrivate  IPClass = "private"
	IPPublic   IPClass = "public"
)

// ClassifyIP returns the class of a caller's address (IPv4-mapped IPv6
// addresses are classed as IPv4; link-local and unique-local count as
// private).
func ClassifyIP(a netip.Addr) IPClass {
	a = a.Unmap()
	switch {
	case a.IsLoopback():
		return IPLoopback
	case a.IsPrivate(), a.IsLinkLocalUnicast(), a.IsUnspecified(), !a.IsValid():
		return IPPrivate
	}
	return IPPublic
}

// Record is one request as the request log keeps it.
type Record struct {
	Time       time.Time // when the request arrived
	RequestID  string
	TenantID   string
	TenantName string
	// Model is the model the caller asked for; Target is what served it
	// ("provider/connection/model"), empty when nothing did.
	Model           string
	Target          string
	CallerDialect   string // openai, anthropic, responses
	UpstreamDialect string
	Status          int
	ErrorCode       string // the gateway's or the provider's code; empty on success
	Attempts        int
	Fallbacks       int
	AdmissionWait   time.Duration
	TTFT            time.Duration // zero when no token arrived
	Latency         time.Duration
	TokensIn        int64 // input tokens, cached included
	TokensOut       int64
	TokensCached    int64
	CostNano        int64 // nano-dollars
	ClientIP        IPClass
	// Changes lists what the gateway changed in the request to fit the
	// serving model (internal/fit): "dropped=<fields>; adjusted=<field=from->to,…>",
	// as the X-OmniRoute-Dropped and X-OmniRoute-Adjusted headers say;
	// empty when nothing.
	Changes string
}

// Filter selects requests. Zero fields do not filter.
type Filter struct {
	Tenant string // tenant id or name
	Model  string
	// Status is an exact status code, or 2..5 for a class (4 = 4xx).
	Status int
	Since  time.Time // inclusive
	Until  time.Time // exclusive
	// Cursor continues a listing (Page.Next); empty starts at the newest.
	Cursor string
	// Limit is the page size (default 100, at most 1000).
	Limit int
}

// Match reports whether r passes every filter of f (the cursor aside).
func (f *Filter) Match(r *Record) bool {
	switch {
	case f.Tenant != "" && r.TenantID != f.Tenant && r.TenantName != f.Tenant,
		f.Model != "" && r.Model != f.Model,
		f.Status >= 2 && f.Status <= 5 && r.Status/100 != f.Status,
		f.Status != 0 && (f.Status < 2 || f.Status > 5) && r.Status != f.Status,
		!f.Since.IsZero() && r.Time.Before(f.Since.Truncate(time.Millisecond)),
		!f.Until.IsZero() && !r.Time.Before(f.Until.Truncate(time.Millisecond)):
		return false
	}
	return true
}

// Page is one page of requests, newest first. Next is empty on the last
// page. Paging is stable under inserts: a page never repeats or skips a
// record because newer ones arrived. A page may hold fewer than Limit
// records, none even, and still have a Next: the store bounds what one
// page reads (a rare filter over a long log), and Next goes on from there.
type Page struct {
	Records []Record
	Next    string
}

// Bucket is the width of a usage row.
type Bucket string

// Buckets.
const (
	Hour Bucket = "hour"
	Day  Bucket = "day"
)

// UsageQuery selects usage rows. Zero fields do not filter.
type UsageQuery struct {
	Since, Until time.Time
	Tenant       string // tenant id or name
	Model        string
	Bucket       Bucket // default Day
	// Limit bounds the rows returned (0: MaxUsagePage); After continues
	// a listing after the row it names (rows come ordered by bucket,
	// tenant id and model).
	Limit int
	After *UsageKey
}

// MaxUsagePage bounds UsageQuery.Limit.
const MaxUsagePage = 5000

// UsageKey is a usage row's position in a listing.
type UsageKey struct {
	Start    time.Time
	TenantID string
	Model    string
}

// Key is r's position.
func (r *UsageRow) Key() UsageKey { return UsageKey{r.Start, r.TenantID, r.Model} }

// Refusal counts requests of one tenant refused, with one error code,
// before the tenant's limits took them (a bad key, an unknown model, a
// malformed body, the limits' own refusals): they are counted per hour,
// tenant and code, never kept one record each, so that a flood of them
// adds a bounded number of rows.
type Refusal struct {
	// Start is the hour (AddRefusals rounds down) or, read back, the
	// start of the earliest hour counted.
	Start      time.Time
	TenantID   string
	TenantName string
	Code       string
	Count      int64
}

// UsageRow is the usage of one tenant and model in one hour or day.
type UsageRow struct {
	Start        time.Time
	TenantID     string
	TenantName   string
	Model        string
	Requests     int64
	Errors       int64 // status >= 400
	TokensIn     int64
	TokensOut    int64
	TokensCached int64
	CostNano     int64
}

// CostUSD is the record's cost in dollars, as the APIs show it.
func (r *Record) CostUSD() float64 { return pricing.USD(r.CostNano) }

// CostUSD is the row's cost in dollars, as the APIs show it.
func (u *UsageRow) CostUSD() float64 { return pricing.USD(u.CostNano) }

// LogStore persists the request log and its usage aggregates.
type LogStore interface {
	// InsertRequests stores records and adds them to the hourly usage, in
	// one transaction.
	InsertRequests(ctx context.Context, recs []Record) error
	Requests(ctx context.Context, f Filter) (Page, error)
	// Usage lists usage rows (at most q.Limit, after q.After); UsageTotal
	// sums every row q selects, whatever its Limit.
	Usage(ctx context.Context, q UsageQuery) ([]UsageRow, error)
	UsageTotal(ctx context.Context, q UsageQuery) (UsageRow, error)
	// AddRefusals adds counts of refused requests to their hours;
	// Refusals sums them per tenant and code over q's window and tenant
	// (q.Model and q.Bucket do not apply), largest first, at most
	// q.Limit.
	AddRefusals(ctx context.Context, rs []Refusal) error
	Refusals(ctx context.Context, q UsageQuery) ([]Refusal, error)
	// Spend returns each tenant's cost (nano-dollars) since a time, from
	// the usage aggregates, to seed budgets at start-up.
	Spend(ctx context.Context, since time.Time) (map[string]int64, error)
	// DeleteBefore deletes requests older than requests and usage rows
	// older than usage; it returns how many requests went.
	DeleteBefore(ctx context.Context, requests, usage time.Time) (int64, error)
}

// Store is both, in one database.
type Store interface {
	KeyStore
	LogStore
	Close() error
}
