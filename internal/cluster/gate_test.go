package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// fakeStream plays a peer's side of the remote stream: RecvMsg yields
// msgs in order, then io.EOF.
type fakeStream struct {
	ctx  context.Context
	msgs []*remote.RemoteMessage
	// before, when set, runs before message i is read.
	before func(i int)
	n      int
}

func (f *fakeStream) RecvMsg(m any) error {
	if len(f.msgs) == 0 {
		return io.EOF
	}
	if f.before != nil {
		f.before(f.n)
	}
	f.n++
	next := f.msgs[0]
	f.msgs = f.msgs[1:]
	proto.Reset(m.(proto.Message))
	proto.Merge(m.(proto.Message), next)
	return nil
}
func (f *fakeStream) Context() context.Context     { return f.ctx }
func (f *fakeStream) SendMsg(any) error            { return nil }
func (f *fakeStream) SetHeader(metadata.MD) error  { return nil }
func (f *fakeStream) SendHeader(metadata.MD) error { return nil }
func (f *fakeStream) SetTrailer(metadata.MD)       {}

func connectMsg(sys, addr string) *remote.RemoteMessage {
	return &remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{
		ConnectionType: &remote.ConnectRequest_ServerConnection{ServerConnection: &remote.ServerConnection{SystemId: sys, Address: addr}}}}}
}

// batch is a batch of one envelope to the cooldowns actor, from sender
// (nil: none).
func batch(tag string, sender *actor.PID) *remote.RemoteMessage {
	b := &remote.MessageBatch{TypeNames: []string{tag}, Targets: []*actor.PID{actor.NewPID("127.0.0.1:1", "omniroute-cooldowns")},
		Envelopes: []*remote.MessageEnvelope{{Target: 0}}}
	if sender != nil {
		b.Senders = []*actor.PID{sender}
		b.Envelopes[0].Sender = 1
	}
	return &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}}
}

// run passes msgs through g's stream interceptor from a peer presenting
// cert, and returns the tags of the batches delivered and the error the
// stream ended with (nil at io.EOF).
func run(g *gate, cert *x509.Certificate, msgs ...*remote.RemoteMessage) ([]string, error) {
	return runHook(g, cert, nil, msgs...)
}

// runHook is run with before called ahead of reading message i.
func runHook(g *gate, cert *x509.Certificate, before func(i int), msgs ...*remote.RemoteMessage) ([]string, error) {
	ctx := context.Background()
	if cert != nil {
		ctx = peer.NewContext(ctx, &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000},
			AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}}})
	}
	var got []string
	err := g.stream(nil, &fakeStream{ctx: ctx, msgs: msgs, before: before}, &grpc.StreamServerInfo{FullMethod: receiveMethod}, func(_ any, ss grpc.ServerStream) error {
		for {
			var m remote.RemoteMessage
			if err := ss.RecvMsg(&m); err != nil {
				return err
			}
			if b := m.GetMessageBatch(); b != nil {
				got = append(got, b.TypeNames[0])
			}
		}
	})
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return got, err
}

// certFor is a certificate valid for host: the gate reads only its names
// (the TLS handshake verified the chain).
func certFor(host string) *x509.Certificate {
	return &x509.Certificate{IPAddresses: []net.IP{net.ParseIP(host)}}
}

func members(ms ...[2]string) []*pcluster.Member {
	var out []*pcluster.Member
	for _, m := range ms {
		host, port, _ := net.SplitHostPort(m[1])
		var p int32
		for _, c := range port {
			p = p*10 + c - '0'
		}
		out = append(out, &pcluster.Member{Id: m[0], Host: host, Port: p})
	}
	return out
}

// TestGateDeliversOnlyCurrentMembers: a connection's batches reach the
// actors only while the member it named is in the member list, and only
// when their senders live at its address; everything else is dropped and
// counted.
func TestGateDeliversOnlyCurrentMembers(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	cert := certFor("127.0.0.1")
	const a, b = "127.0.0.1:7001", "127.0.0.1:7002"
	g := newGate(false, log)
	g.setMembers(members([2]string{"e2e@sysA", a}, [2]string{"e2e@sysB", b}))
	own := actor.NewPID(b, "future$1")

	for _, c := range []struct {
		name    string
		msgs    []*remote.RemoteMessage
		want    []string
		refused int64
	}{
		{"a member", []*remote.RemoteMessage{connectMsg("sysB", b), batch("1", nil), batch("2", own)}, []string{"1", "2"}, 0},
		{"a batch before the connection named its member", []*remote.RemoteMessage{batch("1", nil), connectMsg("sysB", b), batch("2", nil)}, []string{"2"}, 1},
		{"a stranger naming an address no member has", []*remote.RemoteMessage{connectMsg("sysX", "127.0.0.1:7999"), batch("1", nil)}, nil, 1},
		{"a stranger naming a member's address with another id", []*remote.RemoteMessage{connectMsg("sysX", b), batch("1", nil)}, nil, 1},
		{"a forged sender at another member's address", []*remote.RemoteMessage{connectMsg("sysB", b), batch("1", actor.NewPID(a, "future$9")), batch("2", own)}, []string{"2"}, 1},
	} {
		before := g.refused.Load()
		got, err := run(g, cert, c.msgs...)
		if err != nil {
			t.Errorf("%s: the stream ended with %v", c.name, err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: delivered %v, want %v", c.name, got, c.want)
		}
		if d := g.refused.Load() - before; d != c.refused {
			t.Errorf("%s: counted %d refused, want %d", c.name, d, c.refused)
		}
	}

	// A member removed from the list is not heard from then on, on a
	// connection it opened while it was one; back in the list, it is.
	got, err := runHook(g, cert, func(i int) {
		switch i {
		case 2:
			g.setMembers(members([2]string{"e2e@sysA", a}))
		case 3:
			g.setMembers(members([2]string{"e2e@sysA", a}, [2]string{"e2e@sysB", b}))
		}
	}, connectMsg("sysB", b), batch("before", nil), batch("removed", nil), batch("back", nil))
	if err != nil || !slices.Equal(got, []string{"before", "back"}) {
		t.Fatalf("delivered %v (%v) across a removal and a return, want [before back]", got, err)
	}

	// One member per connection: a second ConnectRequest ends it.
	if _, err := run(g, cert, connectMsg("sysB", b), connectMsg("sysA", a), batch("1", nil)); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a second ConnectRequest: %v, want PermissionDenied", err)
	}
	// No verified certificate (a server built without client auth): no
	// stream.
	if _, err := run(g, nil, connectMsg("sysB", b)); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a stream without a verified certificate: %v, want Unauthenticated", err)
	}
}

// TestGateBindsCertificateHosts: with certificates, a peer may claim only
// an address on a host its certificate is valid for.
func TestGateBindsCertificateHosts(t *testing.T) {
	g := newGate(true, slog.New(slog.DiscardHandler))
	const b = "127.0.0.2:7002"
	g.setMembers(members([2]string{"e2e@sysB", b}))
	if got, err := run(g, certFor("127.0.0.2"), connectMsg("sysB", b), batch("1", nil)); err != nil || len(got) != 1 {
		t.Fatalf("a member with a certificate for its host: delivered %v, %v", got, err)
	}
	if _, err := run(g, certFor("127.0.0.1"), connectMsg("sysB", b), batch("1", nil)); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a certificate for 127.0.0.1 claiming a member at %s: %v, want PermissionDenied", b, err)
	}
}

// TestGateRefusesOtherMethods: protoactor's unary methods panic on the
// server (which would end the process); the gate answers them itself, and
// a stream other than Receive is refused.
func TestGateRefusesOtherMethods(t *testing.T) {
	g := newGate(false, slog.New(slog.DiscardHandler))
	for _, m := range []string{"/remote.Remoting/ListProcesses", "/remote.Remoting/GetProcessDiagnostics"} {
		_, err := g.unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: m}, func(context.Context, any) (any, error) {
			panic("the handler ran")
		})
		if status.Code(err) != codes.Unimplemented {
			t.Errorf("%s: %v, want Unimplemented", m, err)
		}
	}
	err := g.stream(nil, &fakeStream{ctx: context.Background()}, &grpc.StreamServerInfo{FullMethod: "/remote.Remoting/Other"}, func(any, grpc.ServerStream) error {
		panic("the handler ran")
	})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("another stream: %v, want Unimplemented", err)
	}
}
