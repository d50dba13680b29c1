package mcptools_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/mcptools"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// TestAttentionOnAMesh plays the attention table on a real mesh, as the harness sees it: a wake is
// the inbox resource's update notification, and what arrived is what cotal_inbox returns. Quiet
// holds ambient without waking but a mention wakes; muted drops both while a DM still wakes; focus
// holds ambient for recall without waking, and the DM it lets in comes first.
func TestAttentionOnAMesh(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	var wakes atomic.Int64
	cs, claude := sessionWith(t, m, ledger.Request{Name: "claude", Subscribe: []string{"general", "team"},
		AllowSubscribe: []string{"general", "team"}, AllowPublish: []string{"general", "team"}},
		&mcp.ClientOptions{ResourceUpdatedHandler: func(context.Context, *mcp.ResourceUpdatedNotificationRequest) { wakes.Add(1) }},
		"general", "team")
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: mcptools.InboxURI}); err != nil {
		t.Fatal(err)
	}
	bob := connect(t, m, ledger.Request{Name: "bob", Subscribe: []string{"general", "team"}, AllowPublish: []string{"general", "team"}}, (&peer{}).handle)
	post := func(channel, text string, mention bool) {
		t.Helper()
		var opts []cotal.SendOption
		if mention {
			opts = append(opts, cotal.Mentions("claude"))
		}
		if _, err := bob.Post(ctx, channel, []wire.Part{wire.TextPart(text)}, opts...); err != nil {
			t.Fatal(err)
		}
	}
	dm := func(text string) {
		t.Helper()
		if _, err := bob.DirectMessage(ctx, claude.Principal(), []wire.Part{wire.TextPart(text)}); err != nil {
			t.Fatal(err)
		}
	}
	// arrived waits until the inbox holds text (peeking), then lets a wake, if any, land.
	arrived := func(text string) {
		t.Helper()
		meshtest.Eventually(t, wait, text+" in the inbox", func() bool {
			return strings.Contains(call(t, cs, "cotal_inbox", map[string]any{"peek": true}, false), text)
		})
		time.Sleep(200 * time.Millisecond)
	}
	expect := func(what string, wake bool, send func(), text string) {
		t.Helper()
		before := wakes.Load()
		send()
		arrived(text)
		if woke := wakes.Load() > before; woke != wake {
			t.Errorf("%s: woke %v, want %v", what, woke, wake)
		}
	}
	read := func() string { t.Helper(); return call(t, cs, "cotal_inbox", nil, false) }

	expect("ambient, attention open and idle", true, func() { post("general", "ambient-open", false) }, "ambient-open")
	read()

	call(t, cs, "cotal_channel_mode", map[string]any{"channel": "team", "mode": "quiet"}, false)
	expect("ambient on a quiet channel", false, func() { post("team", "ambient-quiet", false) }, "ambient-quiet")
	expect("a mention on a quiet channel", true, func() { post("team", "mention-quiet", true) }, "mention-quiet")
	read()

	call(t, cs, "cotal_channel_mode", map[string]any{"channel": "general", "mode": "muted"}, false)
	post("general", "ambient-muted", false)
	post("general", "mention-muted", true)
	// The two posts went out before the DM, on a shorter path: by the time it is in, they were
	// decided.
	expect("a DM with a muted channel", true, func() { dm("dm-muted") }, "dm-muted")
	if got := read(); strings.Contains(got, "ambient-muted") || strings.Contains(got, "mention-muted") {
		t.Errorf("a muted channel's messages reached the inbox: %s", got)
	}

	call(t, cs, "cotal_channel_mode", map[string]any{"channel": "team", "mode": "normal"}, false)
	call(t, cs, "cotal_status", map[string]any{"attention": "focus"}, false)
	expect("ambient under focus", false, func() { post("team", "ambient-focus", false) }, "ambient-focus")
	expect("a DM under focus", true, func() { dm("dm-focus") }, "dm-focus")
	got := read()
	if i, j := strings.Index(got, "dm-focus"), strings.Index(got, "ambient-focus"); i < 0 || j < 0 || i > j || !strings.Contains(got, "[#team, held]") {
		t.Errorf("under focus the inbox should return the DM first, then the held ambient as recall: %s", got)
	}
}

// TestInboxWindowOnAMesh: 60 DMs of a kilobyte come back over two cotal_inbox calls, each within
// the window, the first saying more are held, none lost and none twice.
func TestInboxWindowOnAMesh(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	cs, claude := session(t, m)
	bob := connect(t, m, ledger.Request{Name: "bob"}, (&peer{}).handle)
	body := strings.Repeat("x", 1000)
	for i := range 60 {
		if _, err := bob.DirectMessage(ctx, claude.Principal(), []wire.Part{wire.TextPart(fmt.Sprintf("dm-%02d %s", i, body))}); err != nil {
			t.Fatal(err)
		}
	}
	more := regexp.MustCompile(`… (\d+) more messages held`)
	count := func(out string) int {
		n := strings.Count(out, "[DM]")
		if m := more.FindStringSubmatch(out); m != nil {
			k, _ := strconv.Atoi(m[1])
			n += k
		}
		return n
	}
	meshtest.Eventually(t, wait, "60 DMs in the inbox", func() bool {
		return count(call(t, cs, "cotal_inbox", map[string]any{"peek": true}, false)) == 60
	})
	seen := map[string]int{}
	dmID := regexp.MustCompile(`"(dm-\d\d) x+"`)
	for i, wantMore := range []bool{true, false} {
		out := call(t, cs, "cotal_inbox", nil, false)
		if len(out) > mcptools.InboxWindow {
			t.Errorf("call %d returned %d characters, over the window of %d", i+1, len(out), mcptools.InboxWindow)
		}
		if more.MatchString(out) != wantMore {
			t.Errorf("call %d: more held %v, want %v", i+1, !wantMore, wantMore)
		}
		for _, m := range dmID.FindAllStringSubmatch(out, -1) {
			seen[m[1]]++
		}
	}
	if len(seen) != 60 {
		t.Fatalf("two calls returned %d distinct DMs, want 60", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s returned %d times", id, n)
		}
	}
}

// TestDocsAndReconnect: cotal_docs serves its index, a page and a search offline, and names its
// pages when asked for one it lacks; cotal_reconnect rebuilds the connection at once.
func TestDocsAndReconnect(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	cs, _ := session(t, m)
	if got := call(t, cs, "cotal_docs", nil, false); !strings.Contains(got, "Pages") || !strings.Contains(got, "attention") {
		t.Errorf("the index: %s", got)
	}
	if got := call(t, cs, "cotal_docs", map[string]any{"page": "attention"}, false); !strings.Contains(got, "A muted channel drops everything") {
		t.Errorf("the attention page: %s", got)
	}
	if got := call(t, cs, "cotal_docs", map[string]any{"query": "anycast"}, false); !strings.Contains(got, "addressing: ") || !strings.Contains(got, "tools: ") {
		t.Errorf("a search: %s", got)
	}
	if got := call(t, cs, "cotal_docs", map[string]any{"page": "nope"}, true); !strings.Contains(got, "pages: index") {
		t.Errorf("a missing page: %s", got)
	}
	call(t, cs, "cotal_docs", map[string]any{"page": "tools", "query": "x"}, true)
	if got := call(t, cs, "cotal_reconnect", nil, false); !strings.Contains(got, "reconnected ✓") {
		t.Fatalf("reconnect: %s", got)
	}
	if got := call(t, cs, "cotal_connection_status", nil, false); !strings.HasPrefix(got, "connected") {
		t.Errorf("after the reconnect: %s", got)
	}
}
