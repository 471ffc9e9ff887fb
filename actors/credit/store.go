package credit

import (
	"context"
	"encoding/json"
	"errors"
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
	// Calls are a rolling budget's last call of each node, written with
	// the windows the call changed, so a retry of it is answered from
	// here, not applied twice, even by another activation.
	Calls []CallMark `json:",omitempty"`
}

// CallMark is a node's last rolling call a grain applied: its Seq, what
// it granted and the grant's stamp (the grain's clock, Unix ns; also when
// it was applied).
type CallMark struct {
	Node    string
	Seq     uint64
	Granted int64
	At      int64
}

// rollingRecord is a rolling record's form in etcd after "R ".
type rollingRecord struct {
	Rings []rolling.RingState
	Calls []CallMark `json:",omitempty"`
}

// Store keeps window grains' records where every member can read them.
//
// Every record has a version, and Save writes only over the version the
// grain last read or wrote: two activations of one grain (members that
// briefly disagree on who owns it, which protoactor's placement allows)
// then cannot both grant from the same room. The one whose write loses
// reads the record again and answers from it.
type Store interface {
	// Load reads key's record and its version (0: no record yet).
	Load(ctx context.Context, key string) (Record, int64, error)
	// Save writes r if key's record is still at version (0: none yet)
	// and returns the new version; ErrConflict if it is not.
	Save(ctx context.Context, key string, r Record, version int64) (int64, error)
}

// ErrConflict: the record changed since the version a Save names.
var ErrConflict = errors.New("budget record changed since it was read")

// MemStore is a Store in memory, shared by the members of one process
// (unit tests with the in-memory cluster provider).
type MemStore struct {
	mu   sync.Mutex
	m    map[string]Record
	vers map[string]int64
	next int64
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{m: map[string]Record{}, vers: map[string]int64{}} }

// Load implements Store.
func (s *MemStore) Load(_ context.Context, key string) (Record, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key], s.vers[key], nil
}

// Save implements Store.
func (s *MemStore) Save(_ context.Context, key string, r Record, version int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.vers[key] != version {
		return 0, ErrConflict
	}
	s.next++
	s.m[key], s.vers[key] = r, s.next
	return s.next, nil
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
func (s *EtcdStore) Load(ctx context.Context, key string) (Record, int64, error) {
	resp, err := s.c.Get(ctx, s.prefix+key)
	if err != nil {
		return Record{}, 0, fmt.Errorf("reading budget record %q from etcd: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return Record{}, 0, nil
	}
	kv := resp.Kvs[0]
	if v, ok := strings.CutPrefix(string(kv.Value), "R "); ok {
		var rr rollingRecord
		if err := json.Unmarshal([]byte(v), &rr); err != nil {
			return Record{}, 0, fmt.Errorf("budget record %q in etcd is malformed: %v", key, err)
		}
		return Record{Rings: rr.Rings, Calls: rr.Calls}, kv.ModRevision, nil
	}
	// "r " is the form before call marks: the windows alone.
	if v, ok := strings.CutPrefix(string(kv.Value), "r "); ok {
		var rec Record
		if err := json.Unmarshal([]byte(v), &rec.Rings); err != nil {
			return Record{}, 0, fmt.Errorf("budget record %q in etcd is malformed: %v", key, err)
		}
		return rec, kv.ModRevision, nil
	}
	w, g, ok := strings.Cut(string(kv.Value), " ")
	win, err1 := strconv.ParseUint(w, 10, 64)
	granted, err2 := strconv.ParseInt(g, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return Record{}, 0, fmt.Errorf("budget record %q in etcd is malformed: %q", key, kv.Value)
	}
	return Record{Window: win, Granted: granted}, kv.ModRevision, nil
}

// Save implements Store.
// Save implements Store: one transaction that puts the record only while
// the key's modification revision is version (0 for a key that does not
// exist), so the new version is the transaction's revision.
func (s *EtcdStore) Save(ctx context.Context, key string, r Record, version int64) (int64, error) {
	v := strconv.FormatUint(r.Window, 10) + " " + strconv.FormatInt(r.Granted, 10)
	if r.Rings != nil {
		b, err := json.Marshal(rollingRecord{Rings: r.Rings, Calls: r.Calls})
		if err != nil {
			return 0, fmt.Errorf("encoding budget record %q: %w", key, err)
		}
		v = "R " + string(b)
	}
	k := s.prefix + key
	resp, err := s.c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", version)).Then(clientv3.OpPut(k, v)).Commit()
	if err != nil {
		return 0, fmt.Errorf("writing budget record %q to etcd: %w", key, err)
	}
	if !resp.Succeeded {
		return 0, ErrConflict
	}
	return resp.Header.Revision, nil
}
