package clustere2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/omniroute/gateway/actors/credit"
	icluster "github.com/omniroute/gateway/internal/cluster"
	"github.com/omniroute/gateway/internal/clusterwire"
	"github.com/omniroute/gateway/messages"
)

// A stranger is a protoactor remote of its own in a child process (this
// test binary, run again with strangerEnv set: TestMain dispatches), not
// a member of the cluster: it dials members' remote ports and sends what
// the attacker's probe sent. It runs in its own process for the reason
// doc.go gives (one remote layer per process under the race detector).
// With strangerSecretEnv it holds the cluster secret, so its TLS
// handshakes succeed; without, it speaks plaintext as protoactor does by
// default. The test drives it over stdin with one JSON command a line and
// reads one "STRANGER {json}" line per command on stdout.
const (
	strangerEnv        = "OMNIROUTE_E2E_STRANGER"
	strangerSecretEnv  = "OMNIROUTE_E2E_STRANGER_SECRET"
	strangerClusterEnv = "OMNIROUTE_E2E_STRANGER_CLUSTER"
	strangerPrefix     = "STRANGER "
)

// strangerCmd is one thing the stranger does.
type strangerCmd struct {
	// Op: cooldown, quota, poison, listprocesses, activate, credit, hold,
	// held, or all
	// (the commands of All at once).
	Op     string        `json:"op"`
	All    []strangerCmd `json:"all,omitempty"`
	Member string        `json:"member"` // the member's remote address
	// cooldown: Target cooled until UntilMs (Unix ms).
	Target  string `json:"target,omitempty"`
	UntilMs int64  `json:"untilMs,omitempty"`
	// quota: a reading of connection Conn.
	Conn string `json:"conn,omitempty"`
	// poison: Actor (a name) is sent a PoisonPill.
	Actor string `json:"actor,omitempty"`
	// activate: grain Identity of the credit kind; credit and hold: the
	// grain at PID (its id at Member).
	Identity string `json:"identity,omitempty"`
	PID      string `json:"pid,omitempty"`
	// credit: one messages.CreditRequest (no limit: a grain reads its
	// budget from its own node's configuration).
	CreditOp uint8          `json:"creditOp,omitempty"`
	Node     string         `json:"node,omitempty"`
	Window   uint64         `json:"window,omitempty"`
	Amount   int64          `json:"amount,omitempty"`
	Need     int64          `json:"need,omitempty"`
	Backs    []strangerBack `json:"backs,omitempty"`
	// hold: the slots to take and keep.
	Cap int64 `json:"cap,omitempty"`
}

// strangerBack is rolling credit given back: N units of the grant the
// grain stamped At (Unix ns).
type strangerBack struct {
	At int64 `json:"at"`
	N  int64 `json:"n"`
}

// strangerOut is its answer to one command.
type strangerOut struct {
	Answered bool   `json:"answered"`
	Err      string `json:"err,omitempty"`
	PID      string `json:"pid,omitempty"`
	// credit: the grain's reply.
	Granted int64 `json:"granted"`
	Left    int64 `json:"left"`
	At      int64 `json:"at"`
	Refused bool  `json:"refused"`
	// hold and held: slots the stranger holds of the grain it holds from.
	Held int64 `json:"held"`
	// all: each command's answer, in order.
	All []strangerOut `json:"all,omitempty"`
	// hello: the stranger's own system id and remote address.
	ID      string `json:"id,omitempty"`
	Address string `json:"address,omitempty"`
}

// The credit grain's ops.
const (
	creditAcquire = uint8(messages.CreditAcquire)
	creditRelease = uint8(messages.CreditRelease)
	creditRenew   = uint8(messages.CreditRenew)
)

// encodeCredit is a credit grain request on the cluster's one wire, as a
// member sends it: the stranger speaks the protocol exactly, so that only
// the gate can keep it out (the control phase of
// TestStrangerOnTheRemotePort shows a member would act on it).
func encodeCredit(c *strangerCmd) *wrapperspb.BytesValue {
	r := &messages.CreditRequest{Op: messages.CreditOp(c.CreditOp), Node: c.Node, Window: c.Window, Amount: c.Amount, Need: c.Need}
	for _, k := range c.Backs {
		r.Backs = append(r.Backs, messages.CreditBack{At: k.At, N: k.N})
	}
	return mustWrap(r)
}

// mustWrap encodes a message the stranger builds; the commands are the
// test's own, so an invalid one is the test's bug.
func mustWrap(m messages.ClusterMessage) *wrapperspb.BytesValue {
	v, err := clusterwire.Wrap(m)
	if err != nil {
		panic(err)
	}
	return v
}

// decodeCredit reads a grain's reply into o.
func decodeCredit(v any, o *strangerOut) error {
	m, err := clusterwire.Unwrap(v)
	if err != nil {
		return err
	}
	r, ok := m.(*messages.CreditReply)
	if !ok {
		return fmt.Errorf("the grain answered a %s", m.ClusterKind())
	}
	o.Refused, o.Granted, o.Left, o.At = r.Refused, r.Granted, r.Left, r.At
	return nil
}

// runStranger is the stranger process: it returns the exit code.
func runStranger() int {
	quiet := slog.New(slog.DiscardHandler)
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	var opts []remote.ConfigOption
	dial := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if secret := os.Getenv(strangerSecretEnv); secret != "" {
		srv, cli, err := icluster.SecretTLS(os.Getenv(strangerClusterEnv), secret)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		dial = []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(cli))}
		opts = append(opts, remote.WithServerOptions(grpc.Creds(credentials.NewTLS(srv))), remote.WithDialOptions(dial...))
	}
	r := remote.NewRemote(system, remote.Configure("127.0.0.1", 0, opts...))
	r.Start()
	out := func(o strangerOut) {
		b, _ := json.Marshal(o)
		fmt.Fprintf(os.Stdout, "%s%s\n", strangerPrefix, b)
	}
	out(strangerOut{ID: system.ID, Address: system.Address()})
	var held struct {
		sync.Mutex
		n int64
	}
	ask := func(pid *actor.PID, msg any) (any, error) {
		return system.Root.RequestFuture(pid, msg, 2*time.Second).Result()
	}
	var handle func(c strangerCmd) strangerOut
	handle = func(c strangerCmd) strangerOut {
		switch c.Op {
		case "all":
			// Every command at once (each unanswered ask waits its 2 s).
			outs := make([]strangerOut, len(c.All))
			var wg sync.WaitGroup
			for i, sub := range c.All {
				wg.Add(1)
				go func() { defer wg.Done(); outs[i] = handle(sub) }()
			}
			wg.Wait()
			return strangerOut{All: outs}
		case "cooldown":
			system.Root.Send(actor.NewPID(c.Member, "omniroute-cooldowns"),
				mustWrap(&messages.SharedCooldown{Target: c.Target, Until: c.UntilMs, Reason: "stranger", From: "stranger"}))
		case "quota":
			system.Root.Send(actor.NewPID(c.Member, "omniroute-quota"), mustWrap(&messages.SharedQuotaHeaders{Conn: c.Conn, From: "stranger"}))
		case "poison":
			system.Root.Poison(actor.NewPID(c.Member, c.Actor))
		case "listprocesses":
			// protoactor's server panics on this unary method, and gRPC
			// does not recover it: one call used to end the member.
			conn, err := grpc.NewClient(c.Member, dial...)
			if err != nil {
				return strangerOut{Err: err.Error()}
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if _, err := remote.NewRemotingClient(conn).ListProcesses(ctx, &remote.ListProcessesRequest{}); err != nil {
				return strangerOut{Err: err.Error()}
			}
			return strangerOut{Answered: true}
		case "activate":
			v, err := ask(actor.NewPID(c.Member, "partition-activator"),
				&pcluster.ActivationRequest{ClusterIdentity: &pcluster.ClusterIdentity{Identity: c.Identity, Kind: credit.KindName}})
			if err != nil {
				return strangerOut{Err: err.Error()}
			}
			a, ok := v.(*pcluster.ActivationResponse)
			if !ok || a.Pid == nil {
				return strangerOut{Answered: true, Err: fmt.Sprintf("answered %T", v)}
			}
			return strangerOut{Answered: true, PID: a.Pid.Id}
		case "credit":
			v, err := ask(actor.NewPID(c.Member, c.PID), encodeCredit(&c))
			if err != nil {
				return strangerOut{Err: err.Error()}
			}
			o := strangerOut{Answered: true}
			if err := decodeCredit(v, &o); err != nil {
				o.Err = err.Error()
			}
			return o
		case "hold":
			// Take every slot of the cap the grain will give, and keep
			// the lease: ask for the rest of the cap, or renew what it
			// holds, every 250 ms (window says what it holds, for a
			// grain rebuilding), until the process ends.
			pid := actor.NewPID(c.Member, c.PID)
			go func() {
				for {
					held.Lock()
					n := held.n
					held.Unlock()
					req := strangerCmd{CreditOp: creditAcquire, Node: c.Node, Window: uint64(n), Amount: c.Cap - n}
					if req.Amount <= 0 {
						req.CreditOp, req.Amount = creditRenew, n
					}
					v, err := ask(pid, encodeCredit(&req))
					if err == nil {
						var o strangerOut
						if decodeCredit(v, &o) == nil {
							held.Lock()
							held.n = o.Granted // slots: what the node holds after the call
							held.Unlock()
						}
					}
					time.Sleep(250 * time.Millisecond)
				}
			}()
		case "held":
			held.Lock()
			defer held.Unlock()
			return strangerOut{Held: held.n}
		default:
			return strangerOut{Err: "unknown op " + c.Op}
		}
		return strangerOut{}
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var c strangerCmd
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			out(strangerOut{Err: err.Error()})
			continue
		}
		out(handle(c))
	}
	return 0
}

// stranger is the test's handle on a stranger process.
type stranger struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	lines   chan string
	id      string
	address string
}

// startStranger runs a stranger; secret "" makes it speak plaintext.
func startStranger(t *testing.T, cluster, secret string) *stranger {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), strangerEnv+"=1", strangerSecretEnv+"="+secret, strangerClusterEnv+"="+cluster)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &stranger{cmd: cmd, in: in, lines: make(chan string, 16)}
	t.Cleanup(func() {
		in.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if l, ok := strings.CutPrefix(sc.Text(), strangerPrefix); ok {
				s.lines <- l
			}
		}
	}()
	hello := s.next(t)
	s.id, s.address = hello.ID, hello.Address
	if s.id == "" || s.address == "" {
		t.Fatalf("the stranger did not say who it is: %+v", hello)
	}
	return s
}

func (s *stranger) next(t *testing.T) strangerOut {
	t.Helper()
	select {
	case l, ok := <-s.lines:
		if !ok {
			t.Fatal("the stranger process ended")
		}
		var o strangerOut
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatalf("the stranger said %q: %v", l, err)
		}
		return o
	case <-time.After(30 * time.Second):
		t.Fatal("the stranger did not answer in 30 s")
	}
	return strangerOut{}
}

// do sends c and returns the stranger's answer.
func (s *stranger) do(t *testing.T, c strangerCmd) strangerOut {
	t.Helper()
	s.send(t, c)
	return s.next(t)
}

// send sends c; next reads the answer.
func (s *stranger) send(t *testing.T, c strangerCmd) {
	t.Helper()
	b, _ := json.Marshal(c)
	if _, err := s.in.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
}

// memberRecord is what internal/cluster/etcdmembers keeps per member.
func (s *stranger) memberRecord(cluster string) (key, value string) {
	host, port, _ := net.SplitHostPort(s.address)
	p, _ := strconv.Atoi(port)
	id := cluster + "@" + s.id
	b, _ := json.Marshal(map[string]any{"id": id, "host": host, "port": p, "kinds": []string{}})
	return "/omniroute/members/" + cluster + "/" + id, string(b)
}
