package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// fetchProfile saves a CPU profile of a gateway built with the benchpprof
// tag, taken over most of a cell (its listener is the bench build's own,
// never the product's).
func fetchProfile(ctx context.Context, addr string, d time.Duration, path string) error {
	secs := max(1, int((d - 500*time.Millisecond).Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/profile?seconds="+strconv.Itoa(secs), nil)
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: time.Duration(secs+30) * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("fetch profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("fetch profile: %s: %s", resp.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("save profile: %w", err)
	}
	return f.Close()
}

// pprofTop summarises a profile with `go tool pprof -top`.
func pprofTop(ctx context.Context, binary, profile string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=40", binary, profile)
	return cmd.Output()
}
