package mockprovider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client drives a running mock's admin API from tests.
type Client struct {
	// BaseURL is the mock's root, e.g. "http://127.0.0.1:PORT".
	BaseURL string
	// HTTPClient is used when set; the default opens a fresh connection per
	// call so that no idle keep-alive goroutine outlives the test (goleak).
	HTTPClient *http.Client
}

var adminHTTPClient = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
}

// Health returns GET /_mock/health.
func (c *Client) Health() (Health, error) {
	var h Health
	err := c.do(http.MethodGet, "/_mock/health", nil, &h)
	return h, err
}

// Stats returns GET /_mock/stats.
func (c *Client) Stats() (Stats, error) {
	var s Stats
	err := c.do(http.MethodGet, "/_mock/stats", nil, &s)
	return s, err
}

// SetBehavior posts an update to /_mock/behavior.
func (c *Client) SetBehavior(b BehaviorUpdate) error {
	body, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("mockprovider client: encode behavior update: %w", err)
	}
	return c.do(http.MethodPost, "/_mock/behavior", body, nil)
}

// Reset posts to /_mock/reset.
func (c *Client) Reset() error {
	return c.do(http.MethodPost, "/_mock/reset", []byte("{}"), nil)
}

func (c *Client) do(method, path string, body []byte, out any) error {
	hc := c.HTTPClient
	if hc == nil {
		hc = adminHTTPClient
	}
	url := strings.TrimSuffix(c.BaseURL, "/") + path
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("mockprovider client: build %s %s: %w", method, url, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("mockprovider client: %s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("mockprovider client: read %s %s: %w", method, url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("mockprovider client: %s %s: status %d: %s", method, url, resp.StatusCode, bytes.TrimSpace(data))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("mockprovider client: decode %s %s: %w", method, url, err)
		}
	}
	return nil
}
