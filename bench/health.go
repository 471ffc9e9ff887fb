package bench

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	lanesactor "github.com/omniroute/gateway/actors/lanes"
	"github.com/omniroute/gateway/bench/lanes"
)

// admissionHealth reads the adaptive controller's section of a gateway's
// GET /api/monitoring/health: why a gateway refused or held back load is
// in its limit and its rejections by reason.
func admissionHealth(addr string) (*lanesactor.Snapshot, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/api/monitoring/health")
	if err != nil {
		return nil, fmt.Errorf("read the health of %s: %w", addr, err)
	}
	defer resp.Body.Close()
	var h struct {
		AdaptiveAdmission *lanesactor.Snapshot `json:"adaptiveAdmission"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return nil, fmt.Errorf("decode the health of %s: %w", addr, err)
	}
	if h.AdaptiveAdmission == nil {
		return nil, fmt.Errorf("the health of %s has no adaptiveAdmission section", addr)
	}
	return h.AdaptiveAdmission, nil
}

// requestCost is the adaptive controller's price of body as a
// single-target request with the default cost function (the benchmark's
// small chat request costs 1: one place at the provider).
func requestCost(body []byte) int64 { return lanes.EstimateCost(len(body)) }
