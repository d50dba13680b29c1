package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/status"
	"github.com/gocotal/cotal/internal/meshtest"
)

// components runs `cotal status --components --json` on dir and returns its exit code and report.
func components(t *testing.T, dir string) (int, map[string]status.Component) {
	t.Helper()
	code, out, stderr := run(t, "status", "--components", "--json", "--dir", dir)
	var rep status.ComponentsReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("status --components --json: exit %d, %q %q: %v", code, out, stderr, err)
	}
	if rep.Exit != code {
		t.Errorf("the report says exit %d, the command exited %d", rep.Exit, code)
	}
	byName := map[string]status.Component{}
	for _, c := range rep.Components {
		byName[strings.TrimSpace(c.Name+" "+string(c.Space))] = c
	}
	return code, byName
}

// TestComponents: every component of a running mesh serves; a part stopped by `cotal down PART`
// is named degraded and the command exits 1; the dashboard `cotal web --detach` runs is listed
// until `cotal down web` stops it; `cotal up` on the running mesh starts the stopped parts again;
// a mesh that is not running exits 2.
func TestComponents(t *testing.T) {
	t.Setenv(envRunCLI, "1") // the detached dashboard is this test binary acting as cotal
	dir := upMesh(t)
	var got map[string]status.Component
	meshtest.Eventually(t, 30*time.Second, "every component serving", func() bool {
		var code int
		code, got = components(t, dir)
		return code == exit.OK
	})
	for _, name := range []string{"broker", "jetstream", "delivery main", "manager main", "warden main"} {
		if got[name].State != status.Serving {
			t.Errorf("%s: %+v, want serving", name, got[name])
		}
	}

	code, out, stderr := run(t, "web", "--detach", "--dir", dir, "--port", "0")
	if code != exit.OK || !strings.Contains(out, "?k=") {
		t.Fatalf("web --detach: exit %d, %q %q", code, out, stderr)
	}
	if _, got = components(t, dir); got["web"].State != status.Serving {
		t.Errorf("the detached dashboard: %+v, want serving", got["web"])
	}
	if code, _, stderr := run(t, "web", "--detach", "--dir", dir, "--port", "0"); code == exit.OK || !strings.Contains(stderr, "already runs") {
		t.Errorf("a second web --detach: exit %d, %q", code, stderr)
	}
	if code, _, stderr := run(t, "down", "web", "--dir", dir); code != exit.OK {
		t.Fatalf("down web: exit %d: %s", code, stderr)
	}
	if _, got = components(t, dir); got["web"].Name != "" {
		t.Errorf("the dashboard is still listed after down web: %+v", got["web"])
	}

	if code, _, stderr := run(t, "down", "delivery", "--dir", dir); code != exit.OK {
		t.Fatalf("down delivery: exit %d: %s", code, stderr)
	}
	code, got = components(t, dir)
	if code != 1 || got["delivery main"].State != status.Degraded || got["manager main"].State != status.Serving {
		t.Errorf("after down delivery: exit %d, delivery %+v, manager %+v; want exit 1 naming delivery", code, got["delivery main"], got["manager main"])
	}
	_, _, stderr = run(t, "status", "--components", "--dir", dir)
	if !strings.Contains(stderr, "delivery main degraded") {
		t.Errorf("status --components does not name the degraded delivery daemon: %q", stderr)
	}
	if code, _, stderr := run(t, "down", "manager", "--dir", dir); code != exit.OK {
		t.Fatalf("down manager: exit %d: %s", code, stderr)
	}
	if _, got = components(t, dir); got["manager main"].State != status.Degraded {
		t.Errorf("after down manager: %+v, want degraded", got["manager main"])
	}
	if code, _, stderr := run(t, "down", "nats", "--dir", dir); code != exit.Usage || !strings.Contains(stderr, "delivery, manager or web") {
		t.Errorf("down nats: exit %d, %q; want a usage error listing the parts", code, stderr)
	}

	// up on the running mesh starts the stopped parts again, and then says every part serves.
	code, _, stderr = run(t, "up", "--dir", dir)
	if code != exit.OK || !strings.Contains(stderr, "manager of space main: serving") || !strings.Contains(stderr, "delivery of space main:") {
		t.Fatalf("up on a mesh with stopped parts: exit %d, %q", code, stderr)
	}
	meshtest.Eventually(t, 30*time.Second, "every component serving again", func() bool {
		code, got = components(t, dir)
		return code == exit.OK
	})
	if got["manager main"].State != status.Serving || got["delivery main"].State != status.Serving {
		t.Errorf("after up: manager %+v, delivery %+v; want both serving", got["manager main"], got["delivery main"])
	}
	if code, _, stderr := run(t, "up", "--dir", dir); code != exit.OK || !strings.Contains(stderr, "every part serving") {
		t.Errorf("up on a mesh whose parts all serve: exit %d, %q", code, stderr)
	}

	if code, got := components(t, t.TempDir()); code != 2 || got["broker"].State != status.Down {
		t.Errorf("no mesh: exit %d, %+v; want 2 with the broker down", code, got["broker"])
	}
}
