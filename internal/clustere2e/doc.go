// Package clustere2e holds the end-to-end tests of cluster mode: gateway
// processes (the real omniroute binary, built by the test) joined through
// a real etcd (go.etcd.io/etcd/server/v3, embedded in the test process on
// loopback) in front of the mock provider, and strangers that dial the
// members' remote ports (this test binary run again as a protoactor remote
// of its own, stranger_test.go). It has no code outside its tests.
//
// The gateways and the strangers run as child processes, one remote layer
// each, because protoactor's remote layer sets gRPC's global logger
// without a lock when it starts: several of them (or one and an etcd
// client) in one process race under the race detector.
package clustere2e
