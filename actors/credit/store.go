package credit

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/omniroute/gateway/internal/rolling"
)

// Record is what a budget grain makes durable before it answers: how much
// of a calendar window it has handed out, or (a rolling budget) what its
// windows count by slot. A grain re-activated on another member (its
// member died or left) resumes from it, so a node's death never resets a
// budget; the credit the dead node held and did not spend stays counted
// until it leaves the window (the safe direction).
type Record struct {
	Window  uint64
	Granted int64
	// Rings are a rolling budget's windows (nil for a calendar one).
	Rings []rolling.RingState
}

// Store keeps window grains' records where every member can read them.
type Store interface {
	Load(ctx context.Context, key string) (Record, bool, error)
	Save(ctx context.Context, key string, r Record) error
}

// MemStore is a Store in memory, shared by the members of one process
// (unit tests with the in-memory cluster provider).
type MemStore struct {
	mu sync.Mutex
	m  map[string]Record
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{m: map[string]Record{}} }

// Load implements Store.
func (s *MemStore) Load(_ context.Context, key string) (Record, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[key]
	return r, ok, nil
}

// Save implements Store.
func (s *MemStore) Save(_ context.Context, key string, r Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = r
	return nil
}

// EtcdStore keeps records in etcd under prefix, one key per budget,
// overwritten each window: the number of keys is the number of shared
// budgets, not of windows.
type EtcdStore struct {
	c      *clientv3.Client
	prefix string
}

// NewEtcdStore stores under prefix (e.g. "/omniroute/credit/<cluster>/").
func NewEtcdStore(c *clientv3.Client, prefix string) *EtcdStore {
	return &EtcdStore{c: c, prefix: prefix}
}

// Load implements Store.
func (s *EtcdStore) Load(ctx context.Context, key string) (Record, bool, error) {
	resp, err := s.c.Get(ctx, s.prefix+key)
	if err != nil {
		return Record{}, false, fmt.Errorf("reading budget record %q from etcd: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return Record{}, false, nil
	}
	if v, ok := strings.CutPrefix(string(resp.Kvs[0].Value), "r "); ok {
		var rec Record
		if err := json.Unmarshal([]byte(v), &rec.Rings); err != nil {
			return Record{}, false, fmt.Errorf("budget record %q in etcd is malformed: %v", key, err)
		}
		return rec, true, nil
	}
	w, g, ok := strings.Cut(string(resp.Kvs[0].Value), " ")
	win, err1 := strconv.ParseUint(w, 10, 64)
	granted, err2 := strconv.ParseInt(g, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return Record{}, false, fmt.Errorf("budget record %q in etcd is malformed: %q", key, resp.Kvs[0].Value)
	}
	return Record{Window: win, Granted: granted}, true, nil
}

// Save implements Store.
func (s *EtcdStore) Save(ctx context.Context, key string, r Record) error {
	v := strconv.FormatUint(r.Window, 10) + " " + strconv.FormatInt(r.Granted, 10)
	if r.Rings != nil {
		b, err := json.Marshal(r.Rings)
		if err != nil {
			return fmt.Errorf("encoding budget record %q: %w", key, err)
		}
		v = "r " + string(b)
	}
	if _, err := s.c.Put(ctx, s.prefix+key, v); err != nil {
		return fmt.Errorf("writing budget record %q to etcd: %w", key, err)
	}
	return nil
}
