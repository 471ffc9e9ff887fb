package mockprovider

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// SetQuotaAPIs posts the usage-API answers to /_mock/quota.
func (c *Client) SetQuotaAPIs(q QuotaAPIs) error {
	body, err := json.Marshal(q)
	if err != nil {
		return fmt.Errorf("mockprovider client: encode quota APIs: %w", err)
	}
	return c.do(http.MethodPost, "/_mock/quota", body, nil)
}

// QuotaAPIs returns GET /_mock/quota.
func (c *Client) QuotaAPIs() (QuotaAPIState, error) {
	var s QuotaAPIState
	err := c.do(http.MethodGet, "/_mock/quota", nil, &s)
	return s, err
}
