package transport

import (
	"time"

	"github.com/omniroute/gateway/transport/port"
)

// Cluster mode in the request path (OMNIROUTE_CLUSTER=etcd,
// docs/cluster.md): a ledger reservation (claim, transport/plan) and a limited
// tenant's reservation (reserveTenant, chargeRequest: transport/limits) also
// take this node's share of the budgets the cluster shares, and settle
// gives it back. The pipeline reaches the cluster's pools only through
// Cluster, the port it declares here; the composition root joins the
// cluster and implements the port (transport/gateway/clusterlayer).

// Cluster is the pipeline's port on the cluster (package port declares
// it once; the root's transport/gateway/clusterlayer implements it).
type Cluster = port.Cluster

// ClusterShare is what a request took from the cluster's pools, held in
// the pooled call and given back at settle (port.ClusterShare).
type ClusterShare = port.ClusterShare

// sharedRes is a request's share of the cluster's pools (the ledger
// reservation's in the plan; the tenant's is transport/limits').
type sharedRes = ClusterShare

// clusterSys is cluster mode's port as the pipeline holds it: nil in
// single-node mode, where none of it exists and the request path checks
// one pointer.
type clusterSys struct{ port Cluster }

// AttachCluster hands the pipeline the cluster's port (cluster mode
// only), after the routing actors and before StartFront, which adds its
// health section.
func (a *Assembly) AttachCluster(c Cluster) {
	a.g.cs = &clusterSys{port: c}
	a.g.lim.Share(c)          // the tenant's share (transport/limits)
	a.g.plan.AttachCluster(c) // the ledger reservation's share (transport/plan)
}

func (cs *clusterSys) takeLedger(r *sharedRes, slot int, tokens int64, now time.Time) (bool, time.Time) {
	return cs.port.TakeLedger(r, slot, tokens, now)
}

func (cs *clusterSys) give(r *sharedRes, actual, cost int64, refund bool) {
	cs.port.Give(r, actual, cost, refund)
}

// stopCluster leaves the cluster. It stops the actor system
// (protoactor's cluster shutdown does), so it runs last in Close.
func (g *Gateway) stopCluster() {
	if g.cs == nil {
		return
	}
	g.cs.port.Stop()
}
