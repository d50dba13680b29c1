package cli

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/iostreams"
)

// startWeb runs `cotal web` on the mesh of dir until the test ends and returns the launch URL it
// printed as its first line.
func startWeb(t *testing.T, dir string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, &iostreams.IOStreams{In: strings.NewReader(""), Out: pw, ErrOut: io.Discard}, []string{"web", "--dir", dir, "--port", "0"})
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		go func() { _, _ = io.Copy(io.Discard, pr) }() // let a late write finish
		select {
		case code := <-done:
			if code != exit.OK {
				t.Errorf("cotal web ended with %d", code)
			}
		case <-time.After(30 * time.Second): // past the dashboard's close and the factory's release bounds
			var stacks strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
			t.Errorf("cotal web did not stop; goroutines:\n%s", stacks.String())
		}
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
	}()
	select {
	case url, ok := <-line:
		if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.Contains(url, "/?k=") {
			t.Fatalf("cotal web's first line: %q", url)
		}
		return url
	case <-time.After(30 * time.Second):
		t.Fatal("cotal web printed no URL")
	}
	return ""
}

// TestWebCommand: `cotal web` prints the launch URL first; opening it serves the dashboard; a
// second use of the token is refused; bad flags are usage errors.
func TestWebCommand(t *testing.T) {
	dir := upMesh(t)
	url := startWeb(t, dir)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	res, err := browser.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(page), "NEEDS YOU") || !strings.Contains(res.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("the dashboard: HTTP %d", res.StatusCode)
	}
	res, err = (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the launch token used twice: HTTP %d", res.StatusCode)
	}
	if code, _, stderr := run(t, "web", "--dir", dir, "--port", "70000"); code != exit.Usage || !strings.Contains(stderr, "--port") {
		t.Errorf("web --port 70000: exit %d %s", code, stderr)
	}
}
