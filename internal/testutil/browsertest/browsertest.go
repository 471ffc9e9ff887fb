// Package browsertest drives headless Chromium (Debian's chromium
// package, which .ci/run installs) for the tests of the dashboard.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// ChromiumPath finds the browser: CHROMIUM_PATH, else chromium on PATH
// (Debian's chromium package, which .ci/run installs).
func ChromiumPath(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM_PATH"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium found: apt-get install -y chromium (.ci/run does it), or set CHROMIUM_PATH")
	return ""
}

// Browser is one headless Chromium tab a page test drives.
type Browser struct {
	Ctx context.Context
	// Close ends the browser (also at the test's end).
	Close func()
	// WaitJS polls a page expression until it is true (20 s, else the
	// test fails with the page's text).
	WaitJS func(what, expr string)
	// Shot saves a full-page screenshot as name.png in the screenshot
	// directory.
	Shot func(name string)
}

// Open starts Chromium (exe) with one tab, saving screenshots under
// screenshotDir.
func Open(t testing.TB, exe, screenshotDir string) *Browser {
	t.Helper()
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 2400),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()),
		// Its own home and caches: browsers of parallel test processes
		// otherwise share ~/.config/chromium (crash reports), ~/.pki
		// (the NSS database) and ~/.cache (fontconfig), which they write
		// as they start.
		chromedp.Env("HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "XDG_CACHE_HOME="+filepath.Join(home, ".cache")))...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	b := &Browser{Ctx: ctx}
	var once sync.Once
	b.Close = func() { once.Do(func() { cancelTimeout(); cancelCtx(); cancelAlloc() }) }
	t.Cleanup(b.Close)
	// Start the browser now, one launch at a time on this machine: test
	// packages run as parallel processes, and Chromium instances starting
	// together (profile set-up, shared memory, crashpad) have been seen
	// to die before they listen.
	unlock := launchLock(t)
	err := chromedp.Do(ctx)
	unlock()
	if err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	b.WaitJS = func(what, expr string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(20*time.Second), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
			page, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("error").textContent + " | " + document.body.innerText.slice(0, 3000)`))
			t.Fatalf("%s: %v\npage: %s", what, err, page)
		}
	}
	b.Shot = func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(screenshotDir, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// launchLock holds an exclusive lock on a file in the temporary directory
// shared by every test process until the returned function is called.
func launchLock(t testing.TB) func() {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "omniroute-browsertest.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("opening the browser launch lock: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("taking the browser launch lock: %v", err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }
}
