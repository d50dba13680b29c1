package cli

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
)

// TestJoinLink: `cotal mint alice --link` prints a link; `cotal join LINK --plain` joins as
// local.alice, online in the roster, and a typed line arrives as her post; once `cotal creds revoke alice` ran, the link no longer connects.
func TestJoinLink(t *testing.T) {
	dir := upMesh(t)
	code, out, stderr := run(t, "mint", "alice", "--link", "--subscribe", "general", "--dir", dir)
	if code != exit.OK {
		t.Fatalf("mint --link: exit %d: %s", code, stderr)
	}
	link := strings.TrimSpace(out)
	if !strings.HasPrefix(link, "cotal://") || strings.Contains(link, "\n") || !strings.Contains(link, "channel=general") {
		t.Fatalf("mint --link printed %q", out)
	}
	if !strings.Contains(stderr, "expiring") {
		t.Errorf("mint --link does not say when the link expires: %q", stderr)
	}

	// The operator watches #general and the roster as the mesh's read-only admin.
	d := mesh.Dir{Path: filepath.Join(dir, mesh.DirName)}
	st, err := d.ReadState()
	if err != nil {
		t.Fatal(err)
	}
	posts := make(chan string, 16)
	admin, err := cotal.Connect(t.Context(), st.URL, cotal.WithCreds(d.CredsPath("main", mesh.AdminCredsName)), cotal.WithPresence(false),
		cotal.WithJoin("general"), cotal.WithHandler(func(_ context.Context, dl *cotal.Delivery) error {
			if dl.Sender.String() == "local.alice" && len(dl.Message.Parts) > 0 {
				posts <- dl.Message.Parts[0].Text
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	roster, err := admin.Roster(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer roster.Stop()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	in, typed := io.Pipe()
	streams := &iostreams.IOStreams{In: in, Out: &iostreams.Buffer{}, ErrOut: &iostreams.Buffer{}}
	done := make(chan int, 1)
	go func() { done <- Main(ctx, streams, []string{"join", link, "--plain"}) }()
	meshtest.Eventually(t, 20*time.Second, "alice online in the roster", func() bool {
		for _, p := range roster.Peers() {
			if p.Key == "local.alice" && p.Online {
				return true
			}
		}
		return false
	})
	if _, err := io.WriteString(typed, "hello from the link\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case text := <-posts:
		if text != "hello from the link" {
			t.Errorf("alice posted %q", text)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the typed line never arrived as alice's post")
	}
	typed.Close()
	select {
	case code := <-done:
		if code != exit.OK {
			t.Errorf("join exited %d at the end of its input", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("join did not end with its input")
	}

	if code, _, stderr := run(t, "creds", "revoke", "alice", "--dir", dir); code != exit.OK {
		t.Fatalf("creds revoke alice: exit %d: %s", code, stderr)
	}
	meshtest.Eventually(t, 20*time.Second, "the revoked link refused", func() bool {
		streams, _, _, _ := iostreams.Test()
		return Main(t.Context(), streams, []string{"join", link, "--plain"}) == exit.NotAuthorized
	})
	if code, _, stderr := run(t, "join", "cotal://nobody@127.0.0.1:1/main?channel=bad%20name", "--plain"); code != exit.Usage || strings.Contains(stderr, "nobody") {
		t.Errorf("a bad link: exit %d, %q; want a usage error that does not quote its secret", code, stderr)
	}
}

// TestMCPFromALink: `cotal mcp --link` serves the agent the link carries, on the mesh it names,
// with no mesh directory; a link beside the flags that name an identity is a usage error.
func TestMCPFromALink(t *testing.T) {
	dir := upMesh(t)
	code, out, stderr := run(t, "mint", "bob", "--link", "--subscribe", "general", "--dir", dir)
	if code != exit.OK {
		t.Fatalf("mint --link: exit %d: %s", code, stderr)
	}
	link := strings.TrimSpace(out)
	t.Chdir(t.TempDir()) // no .cotal here: the link is all the server has
	ctx := t.Context()
	toServer, serverIn := io.Pipe()
	serverOut, fromServer := io.Pipe()
	mcpIO := &iostreams.IOStreams{In: toServer, Out: fromServer, ErrOut: &iostreams.Buffer{}}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, mcpIO, []string{"mcp", "--link", link})
		fromServer.Close()
	}()
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).
		Connect(ctx, &mcpsdk.IOTransport{Reader: serverOut, Writer: serverIn}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "cotal_send", Arguments: map[string]any{"channel": "general", "text": "hi from bob's link"}})
	if err != nil || res.IsError {
		t.Fatalf("cotal_send = %+v, %v", res, err)
	}
	cs.Close()
	select {
	case code := <-done:
		if code != exit.OK {
			t.Errorf("cotal mcp --link exit %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("cotal mcp did not exit when its client went away")
	}
	if code, _, stderr := run(t, "mcp", "--link", link, "--name", "carol"); code != exit.Usage || !strings.Contains(stderr, "--link carries") {
		t.Errorf("mcp --link --name: exit %d, %q", code, stderr)
	}
}
