package cluster

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A tenant id is an HMAC of the caller's key under the install secret
// (internal/tenant), so members with different secrets see one caller as
// different tenants, each with its own limits: a config-file tenant's
// rate limit and concurrency cap would hold per node, not per cluster. In
// cluster mode the install secret is therefore the cluster's, kept in
// etcd under InstallSecretKey and created once: the first member to start
// offers its own, and every member after it takes that one.

// InstallSecretKey is the etcd key of cluster's install secret.
func InstallSecretKey(cluster string) string { return "/omniroute/install-secret/" + cluster }

// ShareInstallSecret returns cluster's install secret from etcd, storing
// offer as it when etcd holds none. The create is one transaction that
// puts only if the key was never created, so of members starting at once
// exactly one offer is stored and all of them get that one. created says
// whether it was this call's offer.
func ShareInstallSecret(c *clientv3.Client, cluster string, offer []byte) (secret []byte, created bool, err error) {
	if len(offer) == 0 {
		return nil, false, fmt.Errorf("cluster: no install secret to offer")
	}
	key := InstallSecretKey(cluster)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(offer))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return nil, false, fmt.Errorf("cluster: cannot read or create the cluster's install secret in etcd (%s): %w; check that etcd answers at OMNIROUTE_CLUSTER_ETCD_ENDPOINTS", key, err)
	}
	if resp.Succeeded {
		return offer, true, nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 || len(kvs[0].Value) < 16 {
		return nil, false, fmt.Errorf("cluster: etcd's %s holds no install secret of at least 16 characters; delete the key to have the next member store its own (tenant ids change with it)", key)
	}
	return kvs[0].Value, false, nil
}
