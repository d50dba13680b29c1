package bench

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startEnv runs a throwaway embedded mesh for the test.
func startEnv(tb testing.TB) *Env {
	tb.Helper()
	env, stop, err := Embedded(tb.Context(), filepath.Join(tb.TempDir(), ".cotal"), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := stop(ctx); err != nil {
			tb.Errorf("stop mesh: %v", err)
		}
	})
	return env
}

// TestRunEveryCase runs every case briefly on a real mesh and checks that each reports the
// figures it promises: rates with their raw baseline and ratio, latency percentiles, sizes.
func TestRunEveryCase(t *testing.T) {
	env := startEnv(t)
	var log *slog.Logger
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	var started []string
	res, err := Run(t.Context(), env, Options{Duration: 300 * time.Millisecond, Agents: []int{40}}, log, func(name string) { started = append(started, name) })
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(started, ","), strings.Join(Names(Options{Agents: []int{40}}), ","); got != want {
		t.Fatalf("ran %s, want %s", got, want)
	}
	byName := map[string]Result{}
	for _, r := range res {
		t.Logf("%-28s %12.1f %12.1f %6.2f %s", r.Name, r.Cotal, r.Raw, r.Ratio, r.Unit)
		if r.Cotal <= 0 {
			t.Errorf("%s: cotal figure %v", r.Name, r.Cotal)
		}
		if r.Raw > 0 && r.Ratio != r.Cotal/r.Raw {
			t.Errorf("%s: ratio %v for %v/%v", r.Name, r.Ratio, r.Cotal, r.Raw)
		}
		if (r.Target == "") != (r.Met == nil) {
			t.Errorf("%s: target %q with met %v", r.Name, r.Target, r.Met)
		}
		byName[r.Name] = r
	}
	for _, name := range []string{"multicast/1x1/128B", "multicast/1x10/4KiB", "dm", "anycast", "channel/durable"} {
		if r, ok := byName[name]; !ok || r.Raw <= 0 {
			t.Errorf("%s: no raw baseline in %+v", name, r)
		}
	}
	if l := byName["dm"].Latency; l == nil || l.Cotal.P50 <= 0 || l.Cotal.P99 < l.Cotal.P50 || l.Raw.P999 < l.Raw.P99 {
		t.Errorf("dm latency %+v", l)
	}
	if r := byName["credentials/jwt/1"]; r.Cotal < 1000 || r.Cotal >= byName["credentials/jwt/10"].Cotal {
		t.Errorf("jwt sizes: 1 channel %v, 10 channels %v", r.Cotal, byName["credentials/jwt/10"].Cotal)
	}
	for _, name := range []string{"presence/40/converge", "presence/40/cpu", "credentials/mint", "credentials/jwt/100", "credentials/jwt/100-pattern"} {
		if _, ok := byName[name]; !ok {
			t.Errorf("no %s result", name)
		}
	}
}

func TestOnlySelectsCases(t *testing.T) {
	cs, err := selected(Options{Only: []string{"multicast/1x10", "dm"}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cs {
		names = append(names, c.name)
	}
	if got, want := strings.Join(names, ","), "multicast/1x10/128B,multicast/1x10/4KiB,dm"; got != want {
		t.Errorf("selected %s, want %s", got, want)
	}
	if _, err := selected(Options{Only: []string{"multi"}}); err == nil || !strings.Contains(err.Error(), `"multi"`) || !strings.Contains(err.Error(), "anycast") {
		t.Errorf("an unknown case: %v", err)
	}
}
