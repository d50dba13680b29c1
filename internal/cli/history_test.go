package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/wire"
)

// chatCounts returns, by channel, how many posts the space's CHAT stream holds, as a stream
// info's subject counts tell.
func chatCounts(t *testing.T, dir string) map[string]int {
	t.Helper()
	d := mesh.Dir{Path: filepath.Join(dir, mesh.DirName)}
	st, err := d.ReadState()
	if err != nil {
		t.Fatal(err)
	}
	c, err := cotal.Connect(t.Context(), st.URL, cotal.WithCreds(d.CredsPath("main", mesh.AdminCredsName)), cotal.WithPresence(false))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(t.Context())
	filter := wire.Space("main").KindAll(wire.KindChat)
	body, _ := json.Marshal(map[string]string{"subjects_filter": filter})
	msg, err := jsapi.Request(t.Context(), c.Conn(), jsapi.StreamInfo+wire.Space("main").ChatStream(), body)
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		State struct {
			Subjects map[string]int `json:"subjects"`
		} `json:"state"`
	}
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for subject, n := range info.State.Subjects {
		out[subject[strings.LastIndexByte(subject, '.')+1:]] += n
	}
	return out
}

// TestHistoryClear: clearing one channel empties it and nothing else; clearing the history
// empties every channel; an agent, which holds no purge grant, is refused by the broker.
func TestHistoryClear(t *testing.T) {
	dir := upMesh(t)
	for ch, n := range map[string]int{"general": 3, "random": 2} {
		for i := range n {
			if code, _, stderr := run(t, "send", "msg", ch, fmt.Sprint("post ", i), "--dir", dir); code != exit.OK {
				t.Fatalf("send: exit %d: %s", code, stderr)
			}
		}
	}
	if got := chatCounts(t, dir); got["general"] != 3 || got["random"] != 2 {
		t.Fatalf("before: %v", got)
	}
	code, out, stderr := run(t, "history", "clear", "--channel", "general", "--dir", dir)
	if code != exit.OK || !strings.Contains(out, "cleared 3 posts from #general") {
		t.Fatalf("history clear --channel general: exit %d, %q %q", code, out, stderr)
	}
	if got := chatCounts(t, dir); got["general"] != 0 || got["random"] != 2 {
		t.Fatalf("after clearing #general: %v, want #random untouched", got)
	}

	// An agent holds no purge row: the broker refuses its purge.
	creds := filepath.Join(t.TempDir(), "carol.creds")
	if code, _, stderr := run(t, "mint", "carol", "--subscribe", "general", "--out", creds, "--dir", dir); code != exit.OK {
		t.Fatalf("mint: exit %d: %s", code, stderr)
	}
	st, err := mesh.Dir{Path: filepath.Join(dir, mesh.DirName)}.ReadState()
	if err != nil {
		t.Fatal(err)
	}
	carol, err := cotal.Connect(t.Context(), st.URL, cotal.WithCreds(creds), cotal.WithPresence(false))
	if err != nil {
		t.Fatal(err)
	}
	defer carol.Close(t.Context())
	pctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	if _, err := jsapi.Request(pctx, carol.Conn(), jsapi.StreamPurge+wire.Space("main").ChatStream(), nil); err == nil {
		t.Error("an agent's stream purge was answered")
	}
	refused := false
	for !refused {
		select {
		case err := <-carol.Errors():
			refused = strings.Contains(err.Error(), "Permissions Violation") && strings.Contains(err.Error(), jsapi.StreamPurge)
		case <-time.After(5 * time.Second):
			t.Fatal("the broker did not refuse an agent's stream purge")
		}
	}
	if got := chatCounts(t, dir); got["random"] != 2 {
		t.Fatalf("a refused purge touched the history: %v", got)
	}

	code, out, stderr = run(t, "history", "clear", "--dms", "--dir", dir)
	if code != exit.OK || !strings.Contains(out, "cleared 2 channel posts and") {
		t.Fatalf("history clear --dms: exit %d, %q %q", code, out, stderr)
	}
	if got := chatCounts(t, dir); got["random"] != 0 {
		t.Fatalf("after history clear: %v", got)
	}
	for _, args := range [][]string{{"--channel", "general", "--dms"}, {"--channel", "team.>"}} {
		if code, _, stderr := run(t, append([]string{"history", "clear", "--dir", dir}, args...)...); code != exit.Usage {
			t.Errorf("history clear %v: exit %d, %q; want a usage error", args, code, stderr)
		}
	}
}
