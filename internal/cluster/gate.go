package cluster

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/omniroute/gateway/internal/sanitize"
)

// The gate is what makes "only members speak to the cluster" true past
// the TLS handshake. protoactor's remote layer delivers whatever arrives
// on a connection to the actor it names, with whatever sender the
// envelope claims, and answers its two unary methods with a panic that
// gRPC does not recover (the process dies). Mutual TLS decides who may
// connect at all (a holder of the cluster secret, or of a certificate of
// the cluster's CA); the gate, a pair of gRPC interceptors on the member's
// server, then decides per message batch:
//
//   - a connection names the member it comes from once, in its first
//     message (protoactor's ConnectRequest: system id and advertised
//     address). With certificates, the address's host must be one the
//     peer's certificate is valid for, as a dialing member checks of the
//     member it dials;
//   - a batch is delivered only while that member is in this member's
//     current member list (the list protoactor publishes from etcd, less
//     the members it has blocked), so a process that holds the credential
//     but is not a member, or no longer is (its etcd key is gone), is
//     heard by nobody: its grain calls, renewals, cooldowns and quota
//     readings are dropped, and the slot leases it held run out at their
//     grains within credit.LeaseTTL;
//   - every sender a batch names must live at that member's address, so
//     a reply-to PID (the identity a grain sees as ctx.Sender()) is the
//     member the connection authenticated, never one it made up;
//   - the unary methods are refused.
//
// What it does not do: tell credential holders apart. With a cluster
// secret, any holder can claim to be any current member (the secret is
// the identity); with certificates, any holder of a member certificate for
// a host can claim a member on that host. Members trust each other; the
// gate keeps out everyone else.
type gate struct {
	// members maps each current member's advertised address to its id.
	members atomic.Pointer[map[string]string]
	// pki binds the claimed address's host to the peer's certificate
	// (certificate mode; with a secret every holder is alike).
	pki bool
	// refused counts the message envelopes dropped.
	refused atomic.Int64
	log     *slog.Logger
}

func newGate(pki bool, log *slog.Logger) *gate {
	g := &gate{pki: pki, log: log}
	empty := map[string]string{}
	g.members.Store(&empty)
	return g
}

// setMembers publishes the member list (protoactor's ClusterTopology).
func (g *gate) setMembers(ms []*pcluster.Member) {
	m := make(map[string]string, len(ms))
	for _, x := range ms {
		m[x.Address()] = x.Id
	}
	g.members.Store(&m)
}

// member reports whether system id sys at address addr is a current
// member. The etcd provider names members "<cluster>@<system id>".
func (g *gate) member(sys, addr string) bool {
	id, ok := (*g.members.Load())[addr]
	return ok && sys != "" && (id == sys || strings.HasSuffix(id, "@"+sys))
}

// serverOptions are the interceptors, for the remote layer's gRPC server.
func (g *gate) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.StreamInterceptor(g.stream), grpc.UnaryInterceptor(g.unary)}
}

// receiveMethod is the remote layer's one streaming method, which carries
// every message between members.
const receiveMethod = "/remote.Remoting/Receive"

// unary refuses the remote layer's unary methods: protoactor does not
// call them, and its server panics on them (ListProcesses and
// GetProcessDiagnostics are "implement me").
func (g *gate) unary(_ context.Context, _ any, info *grpc.UnaryServerInfo, _ grpc.UnaryHandler) (any, error) {
	return nil, status.Errorf(codes.Unimplemented, "%s is not served", info.FullMethod)
}

func (g *gate) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if info.FullMethod != receiveMethod {
		return status.Errorf(codes.Unimplemented, "%s is not served", info.FullMethod)
	}
	gs := &gatedStream{ServerStream: ss, g: g}
	if p, ok := peer.FromContext(ss.Context()); ok {
		gs.from = p.Addr.String()
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 {
			gs.cert = ti.State.VerifiedChains[0][0]
		}
	}
	if gs.cert == nil {
		// The server requires and verifies a client certificate, so this
		// is a server built without it: refuse rather than trust.
		return status.Error(codes.Unauthenticated, "cluster: a member connection without a verified client certificate")
	}
	return handler(srv, gs)
}

// gatedStream is one member connection's inbound stream.
type gatedStream struct {
	grpc.ServerStream
	g    *gate
	from string // the TCP peer, for the log
	cert *x509.Certificate
	// sys and addr are the member the connection said it is.
	sys, addr string
	logged    bool
}

// RecvMsg hands the endpoint reader the connection's messages that may be
// delivered, dropping the rest.
func (s *gatedStream) RecvMsg(m any) error {
	for {
		if err := s.ServerStream.RecvMsg(m); err != nil {
			return err
		}
		rm, ok := m.(*remote.RemoteMessage)
		if !ok {
			return status.Error(codes.Internal, "cluster: unexpected message type on the remote stream")
		}
		switch t := rm.MessageType.(type) {
		case *remote.RemoteMessage_ConnectRequest:
			if err := s.connect(t.ConnectRequest); err != nil {
				s.g.log.Warn("cluster: refused a connection to the remote layer", "peer", s.from, "err", sanitize.Secrets(err.Error()))
				return status.Error(codes.PermissionDenied, err.Error())
			}
			return nil
		case *remote.RemoteMessage_MessageBatch:
			if why := s.admit(t.MessageBatch); why != "" {
				s.g.refused.Add(int64(len(t.MessageBatch.Envelopes)))
				if !s.logged {
					s.logged = true // once per connection: a peer cannot flood the log
					s.g.log.Warn("cluster: dropped messages from a peer that is not a current member", "peer", s.from,
						"claims", sanitize.Secrets(fmt.Sprintf("%.80q", s.addr)), "reason", why)
				}
				continue
			}
			return nil
		default:
			// Nothing else travels from a dialing member to this one.
			continue
		}
	}
}

// connect takes the member a connection says it is, once.
func (s *gatedStream) connect(c *remote.ConnectRequest) error {
	if s.addr != "" {
		return fmt.Errorf("a second ConnectRequest on one connection")
	}
	sc := c.GetServerConnection()
	if sc == nil || sc.SystemId == "" || sc.Address == "" {
		return fmt.Errorf("a ConnectRequest that names no member")
	}
	if s.g.pki {
		host, _, err := net.SplitHostPort(sc.Address)
		if err != nil {
			return fmt.Errorf("a ConnectRequest with the address %.80q, not host:port", sc.Address)
		}
		if err := s.cert.VerifyHostname(host); err != nil {
			return fmt.Errorf("the peer's certificate is not valid for the host it claims (%.80q): %v", host, err)
		}
	}
	s.sys, s.addr = sc.SystemId, sc.Address
	return nil
}

// admit says why batch may not be delivered ("" when it may).
func (s *gatedStream) admit(b *remote.MessageBatch) string {
	if s.addr == "" {
		return "messages before the connection named its member"
	}
	if !s.g.member(s.sys, s.addr) {
		return "not in the member list"
	}
	for _, p := range b.Senders {
		if p.GetAddress() != s.addr {
			return "a sender at another address than the member's"
		}
	}
	return ""
}

// watchTopology keeps the gate's member list current: protoactor publishes
// every change of its list on the actor system's event stream.
func (g *gate) watchTopology(system *actor.ActorSystem) func() {
	sub := system.EventStream.Subscribe(func(ev any) {
		if t, ok := ev.(*pcluster.ClusterTopology); ok {
			g.setMembers(t.Members)
		}
	})
	return func() { system.EventStream.Unsubscribe(sub) }
}
