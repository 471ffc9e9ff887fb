package tenant

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var secret = []byte("0123456789abcdef0123456789abcdef")

func TestIDShapeAndStability(t *testing.T) {
	r, err := NewResolver(secret, ModeOpen, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := r.IDForKey([]byte("sk-live-abc"))
	if !regexp.MustCompile(`^key_[0-9a-f]{16}$`).MatchString(id.String()) {
		t.Fatalf("id %q does not look like key_ + 16 hex", id)
	}
	if id != r.IDForKey([]byte("sk-live-abc")) {
		t.Fatal("same key gave two ids")
	}
	if id == r.IDForKey([]byte("sk-live-abd")) {
		t.Fatal("different keys gave the same id")
	}
	other, _ := NewResolver([]byte("another-secret-of-16+"), ModeOpen, false, nil)
	if id == other.IDForKey([]byte("sk-live-abc")) {
		t.Fatal("ids must differ between installs (secrets)")
	}
	if strings.Contains(id.String(), "abc") {
		t.Fatal("id leaks key material")
	}
}

func TestIdentify(t *testing.T) {
	alice := sha256.Sum256([]byte("alice-key"))
	specs := []Spec{{Name: "alice", KeySHA256: alice}}
	cases := []struct {
		mode     Mode
		anon     bool
		key      string
		loopback bool
		want     Decision
		known    bool
	}{
		{ModeKeys, false, "alice-key", false, Allowed, true},
		{ModeKeys, false, "mallory", true, InvalidKey, false},
		{ModeKeys, false, "", true, MissingKey, false},
		{ModeKeys, true, "", false, Allowed, false},
		{ModeLoopback, false, "anything", true, Allowed, false},
		{ModeLoopback, false, "anything", false, InvalidKey, false},
		{ModeLoopback, false, "alice-key", false, Allowed, true},
		{ModeLoopback, true, "", true, Allowed, false},
		{ModeLoopback, true, "", false, MissingKey, false},
		{ModeOpen, false, "anything", false, Allowed, false},
		{ModeOpen, false, "", false, MissingKey, false},
	}
	for i, tc := range cases {
		r, err := NewResolver(secret, tc.mode, tc.anon, specs)
		if err != nil {
			t.Fatal(err)
		}
		id, tn, d := r.Identify([]byte(tc.key), tc.loopback)
		if d != tc.want || (tn != nil) != tc.known {
			t.Fatalf("case %d: decision %v tenant %v; want %v known=%v", i, d, tn, tc.want, tc.known)
		}
		if d == Allowed && tc.key == "" && id != Anonymous {
			t.Fatalf("case %d: keyless caller got %v, want anonymous", i, id)
		}
		if tn != nil && (tn.Name != "alice" || tn.ID != id) {
			t.Fatalf("case %d: tenant %+v id %v", i, tn, id)
		}
	}
}

func TestDuplicateTenantKeys(t *testing.T) {
	k := sha256.Sum256([]byte("same"))
	if _, err := NewResolver(secret, ModeKeys, false, []Spec{{"a", k}, {"b", k}}); err == nil {
		t.Fatal("two tenants with one key were accepted")
	}
}

func TestLoadOrCreateSecret(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s1, err := LoadOrCreateSecret("", dir)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := LoadOrCreateSecret("", dir)
	if err != nil || string(s1) != string(s2) || len(s1) < 32 {
		t.Fatalf("secret not stable: %q %q %v", s1, s2, err)
	}
	fi, err := os.Stat(filepath.Join(dir, "tenant-secret"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret file mode %v, err %v; want 0600", fi.Mode(), err)
	}
	if s, _ := LoadOrCreateSecret("explicit-secret-value", dir); string(s) != "explicit-secret-value" {
		t.Fatal("explicit secret not used")
	}
	os.WriteFile(filepath.Join(dir, "tenant-secret"), []byte("short\n"), 0o600)
	if _, err := LoadOrCreateSecret("", dir); err == nil {
		t.Fatal("short secret file accepted")
	}
}

// TestLooseSecretFileRefused is part of finding 9: a tenant secret file at
// mode 0644 was accepted silently, though any local user could read it
// and compute every tenant's id.
func TestLooseSecretFileRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tenant-secret")
	if err := os.WriteFile(path, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o602} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := LoadOrCreateSecret("", dir)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("has mode %04o", mode)) || !strings.Contains(err.Error(), "chmod 600") {
			t.Fatalf("mode %04o: %v", mode, err)
		}
	}
	for _, mode := range []os.FileMode{0o600, 0o400} {
		os.Chmod(path, mode)
		if _, err := LoadOrCreateSecret("", dir); err != nil {
			t.Fatalf("mode %04o refused: %v", mode, err)
		}
	}
}

func TestIDForDigestIsTheKeysID(t *testing.T) {
	r, _ := NewResolver(secret, ModeKeys, false, nil)
	if r.IDForDigest(sha256.Sum256([]byte("k"))) != r.IDForKey([]byte("k")) {
		t.Fatal("digest and key give different ids")
	}
}

// Bytes is String without the copy, for every id length, and shares the
// id's memory (the request log copies it).
func TestIDBytesIsString(t *testing.T) {
	for _, text := range []string{"", "a", "anonymous", "key_0123456789abcdef", strings.Repeat("z", IDLen)} {
		var id ID
		copy(id[:], text)
		if got := string(id.Bytes()); got != id.String() || got != text {
			t.Fatalf("Bytes %q, String %q, want %q", got, id.String(), text)
		}
		if b := id.Bytes(); len(b) > 0 && &b[0] != &id[0] {
			t.Fatalf("Bytes of %q copied the id", text)
		}
	}
}
