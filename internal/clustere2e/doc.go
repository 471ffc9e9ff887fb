// Package clustere2e holds the end-to-end test of cluster mode: three
// gateway processes (the real omniroute binary, built by the test) joined
// through a real etcd (go.etcd.io/etcd/server/v3, embedded in the test
// process on loopback) in front of the mock provider. It has no code of
// its own.
//
// The gateways run as child processes, one cluster member each, because
// protoactor's remote layer sets gRPC's global logger without a lock when
// a member starts: several members (or a member and an etcd client) in one
// process race under the race detector.
package clustere2e
