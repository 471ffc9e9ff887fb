package largebody

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func TestBodyIsValidAndDeterministic(t *testing.T) {
	for _, size := range []int{64, 4097, 1 << 20} {
		b, err := io.ReadAll(newBody(7, size))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != size || !strings.HasPrefix(string(b), bodyPrefix) || !strings.HasSuffix(string(b), bodySuffix) {
			t.Fatalf("size %d: got %d bytes", size, len(b))
		}
		sum := sha256.Sum256(b)
		if bodySHA(7, size) != hex.EncodeToString(sum[:]) {
			t.Fatal("bodySHA differs from the body")
		}
		other, _ := io.ReadAll(newBody(8, size))
		if size > 1000 && string(other) == string(b) {
			t.Fatal("bodies of different uploads must differ")
		}
	}
}

// TestSmoke runs the scenario small: the real binary under GOMEMLIMIT, a
// 16 MiB budget, 12 concurrent 4 MiB uploads.
func TestSmoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	r, err := Run(ctx, Options{Uploads: 12, Size: 4 << 20, GoMemLimit: "512MiB", Dir: dir, Binary: filepath.Join(dir, "omniroute-prebuilt-missing")})
	if err == nil {
		t.Fatal("a missing binary must fail the run")
	}
	r, err = Run(ctx, Options{Uploads: 12, Size: 4 << 20, GoMemLimit: "512MiB"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", r.Markdown())
	if err := r.Check(768 << 20); err != nil {
		t.Fatal(err)
	}
	if r.Budget != 16<<20 || r.BudgetSource != "go_memlimit" {
		t.Fatalf("budget %d from %s; GOMEMLIMIT=512MiB gives 16 MiB", r.Budget, r.BudgetSource)
	}
	total, rejected := 0, 0
	for k, n := range r.Outcomes {
		total += n
		if strings.HasPrefix(k, "503 ") {
			rejected += n
		}
	}
	if total != 12 || r.Forwarded == 0 || rejected == 0 || r.Forwarded+rejected != 12 {
		t.Fatalf("outcomes %v, forwarded %d: want every upload answered, some forwarded, some shed", r.Outcomes, r.Forwarded)
	}
	if r.MaxProviderInflight > 4 {
		t.Fatalf("the provider held %d bodies at once; a 16 MiB budget admits at most 4 of 4 MiB", r.MaxProviderInflight)
	}
}

func TestAdmissionRejection(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
		want   bool
	}{
		{503, "chat_admission_busy", true},
		{503, "resource_pressure", true},
		{413, "body_exceeds_budget", true},
		{503, "admission_oversized", true},
		{503, "admission_queue_full", true},
		{503, "upstream_busy", false},
		{502, "upstream_unavailable", false},
		{413, "payload_too_large", false},
		{429, "admission_queue_full", false},
	} {
		if got := admissionRejection(tc.status, tc.code); got != tc.want {
			t.Errorf("%d %s: %v, want %v", tc.status, tc.code, got, tc.want)
		}
	}
}
