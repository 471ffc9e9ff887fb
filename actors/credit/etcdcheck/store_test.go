// Package etcdcheck tests credit.EtcdStore against a real etcd; it is its
// own package so that the credit package's tests do not link etcd's server.
package etcdcheck

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/omniroute/gateway/actors/credit"
	"github.com/omniroute/gateway/internal/rolling"
	"github.com/omniroute/gateway/internal/testutil/etcdtest"
)

// TestEtcdStoreWritesOnlyOverTheVersionItRead: a record is created only
// where none is, overwritten only at the version last read or written,
// and a writer holding an older version gets ErrConflict and changes
// nothing; both encodings (calendar, rolling) read back as written.
func TestEtcdStoreWritesOnlyOverTheVersionItRead(t *testing.T) {
	e := etcdtest.Start(t)
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Addr()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := credit.NewEtcdStore(c, "/omniroute/credit/test/")

	rec, v0, err := s.Load(ctx, "w/k")
	if err != nil || v0 != 0 || rec.Granted != 0 {
		t.Fatalf("a missing record: %+v version %d %v", rec, v0, err)
	}
	v1, err := s.Save(ctx, "w/k", credit.Record{Window: 7, Granted: 10}, 0)
	if err != nil || v1 == 0 {
		t.Fatalf("creating: version %d %v", v1, err)
	}
	if _, err := s.Save(ctx, "w/k", credit.Record{Window: 7, Granted: 99}, 0); !errors.Is(err, credit.ErrConflict) {
		t.Fatalf("creating again over an existing record: %v, want ErrConflict", err)
	}
	v2, err := s.Save(ctx, "w/k", credit.Record{Window: 7, Granted: 20}, v1)
	if err != nil || v2 <= v1 {
		t.Fatalf("writing over version %d: version %d %v", v1, v2, err)
	}
	if _, err := s.Save(ctx, "w/k", credit.Record{Window: 7, Granted: 15}, v1); !errors.Is(err, credit.ErrConflict) {
		t.Fatalf("a writer at stale version %d: %v, want ErrConflict", v1, err)
	}
	rec, v, err := s.Load(ctx, "w/k")
	if err != nil || v != v2 || rec.Window != 7 || rec.Granted != 20 {
		t.Fatalf("after the conflicting write: %+v version %d (want 20 at %d) %v", rec, v, v2, err)
	}

	want := []rolling.RingState{{Dim: rolling.Requests, Period: rolling.Minute, Head: 42, Counts: []int64{1, 0, 3}}}
	rv, err := s.Save(ctx, "r/k", credit.Record{Rings: want}, 0)
	if err != nil {
		t.Fatal(err)
	}
	rec, v, err = s.Load(ctx, "r/k")
	if err != nil || v != rv || !reflect.DeepEqual(rec.Rings, want) || rec.Calls != nil {
		t.Fatalf("a rolling record read back as %+v version %d (want %+v at %d) %v", rec, v, want, rv, err)
	}
	// With the nodes' last calls, which a retry is answered from.
	calls := []credit.CallMark{{Node: "n1", Seq: 9, Granted: 4, At: 1 << 60}, {Node: "n2", Seq: 1, At: 5}}
	rv, err = s.Save(ctx, "r/k", credit.Record{Rings: want, Calls: calls}, rv)
	if err != nil {
		t.Fatal(err)
	}
	rec, v, err = s.Load(ctx, "r/k")
	if err != nil || v != rv || !reflect.DeepEqual(rec.Rings, want) || !reflect.DeepEqual(rec.Calls, calls) {
		t.Fatalf("a rolling record with calls read back as %+v version %d %v", rec, v, err)
	}
	// A record written before the calls were kept ("r " and the rings
	// alone) still reads.
	if _, err := c.Put(ctx, "/omniroute/credit/test/r/old", `r [{"Dim":0,"Period":0,"Head":42,"Counts":[1,0,3]}]`); err != nil {
		t.Fatal(err)
	}
	if rec, _, err = s.Load(ctx, "r/old"); err != nil || len(rec.Rings) != 1 || rec.Rings[0].Head != 42 || rec.Calls != nil {
		t.Fatalf("a record of the earlier form read back as %+v %v", rec, err)
	}
}
