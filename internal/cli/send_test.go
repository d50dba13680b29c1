package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// mintCreds runs `cotal mint NAME args... --out NAME.creds` in the current directory and returns
// the creds file's path.
func mintCreds(t *testing.T, name string, args ...string) string {
	t.Helper()
	out := name + ".creds"
	if code, _, stderr := run(t, append([]string{"mint", name, "--out", out}, args...)...); code != exit.OK {
		t.Fatalf("mint %s: exit %d, %s", name, code, stderr)
	}
	return out
}

// oneLine fails the test unless a command's stderr is a single line.
func oneLine(t *testing.T, stderr string) {
	t.Helper()
	if s := strings.TrimSpace(stderr); s == "" || strings.Contains(s, "\n") {
		t.Errorf("want a one-line reason on stderr, got %q", stderr)
	}
}

// TestSendExitCodes runs `cotal send` from inside a project directory, as an operator would, and
// checks each exit code: 0 for a stored message, 1 for a failure, 2 for a bad command line and 4
// for a refusal by the broker or the credential, each with a one-line reason.
func TestSendExitCodes(t *testing.T) {
	dir := upMesh(t)
	t.Setenv(mesh.EnvDir, "")
	t.Chdir(dir)
	alice := mintCreds(t, "alice", "--subscribe", "general", "--allow-publish", "general", "--provision")
	watcher := mintCreds(t, "watcher", "--profile", "observer")
	mallory := mintCreds(t, "mallory", "--subscribe", "general", "--allow-publish", "general")
	if code, _, stderr := run(t, "creds", "revoke", "mallory"); code != exit.OK {
		t.Fatalf("creds revoke mallory: exit %d, %s", code, stderr)
	}
	st, err := (mesh.Dir{Path: filepath.Join(dir, mesh.DirName)}).ReadState()
	if err != nil {
		t.Fatal(err)
	}
	noMesh := t.TempDir()

	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // a prefix stdout must have, for exit 0
		stderr string // what stderr must mention, otherwise
	}{
		{"post as the credential", []string{"send", "--creds", alice, "msg", "general", "hi"},
			exit.OK, "stored seq ", ""},
		{"post to an explicit server", []string{"send", "--creds", alice, "--server", st.URL, "msg", "general", "hi"},
			exit.OK, "stored seq ", ""},
		// The pinned shape of issue 13: a channel outside the credential's allow-publish.
		{"post outside allow-publish", []string{"send", "--creds", alice, "msg", "other-channel", "hi"},
			exit.NotAuthorized, "", `not permitted by the broker: this credential may not post to "other-channel"`},
		// An observer may publish nothing: the broker itself refuses the direct message.
		{"publish the broker refuses", []string{"send", "--creds", watcher, "dm", "alice", "hi"},
			exit.NotAuthorized, "", "Permissions Violation for Publish"},
		{"revoked credential", []string{"send", "--creds", mallory, "msg", "general", "hi"},
			exit.NotAuthorized, "", "not permitted by the broker: connect to"},
		// A subscription the broker refuses: alice may not read secret.
		{"join the broker refuses", []string{"mcp", "--creds", alice, "--subscribe", "secret"},
			exit.NotAuthorized, "", "join refused by the broker"},
		{"malformed name", []string{"send", "dm", "nobody-yet", "hi"},
			exit.Usage, "", `NAME: invalid actor "nobody-yet"`},
		{"malformed principal", []string{"send", "dm", "local.a.b", "hi"},
			exit.Usage, "", "NAME: invalid principal"},
		{"--as with --creds", []string{"send", "--creds", alice, "--as", "bob", "msg", "general", "hi"},
			exit.Usage, "", "drop --as"},
		{"--server without --creds", []string{"send", "--server", st.URL, "msg", "general", "hi"},
			exit.Usage, "", "--server needs --creds"},
		{"bad --server", []string{"send", "--creds", alice, "--server", "http://x", "msg", "general", "hi"},
			exit.Usage, "", "--server: invalid url"},
		{"missing creds file", []string{"send", "--creds", "nobody.creds", "msg", "general", "hi"},
			exit.Usage, "", "nobody.creds"},
		{"--creds with no mesh to name the server", []string{"send", "--dir", noMesh, "--creds", alice, "msg", "general", "hi"},
			exit.Usage, "", "--creds without --server needs a running mesh"},
		{"unreachable server", []string{"send", "--creds", alice, "--server", "nats://127.0.0.1:1", "msg", "general", "hi"},
			exit.Failed, "", "broker unreachable"},
		{"no mesh", []string{"send", "--dir", noMesh, "msg", "general", "hi"},
			exit.Failed, "", "no mesh is running"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, tt.args...)
			t.Logf("exit %d; stdout %q; stderr %q", code, stdout, stderr)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stdout %q, stderr %q", code, tt.code, stdout, stderr)
			}
			if tt.code == exit.OK {
				if !strings.HasPrefix(stdout, tt.stdout) || stderr != "" {
					t.Errorf("stdout %q, stderr %q; want stdout starting %q", stdout, stderr, tt.stdout)
				}
				return
			}
			if !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr %q does not mention %q", stderr, tt.stderr)
			}
			if tt.code == exit.Usage {
				stderr, _, _ = strings.Cut(stderr, "\nRun '") // the usage hint is a line of its own
			}
			oneLine(t, stderr)
		})
	}
}

// TestSendDMWithoutRosterRow sends direct messages to principals with no presence row: one never
// started (read back from the DM stream with the mesh's admin credential) and one provisioned but
// never connected, which receives it when it first connects.
func TestSendDMWithoutRosterRow(t *testing.T) {
	dir := upMesh(t)
	t.Setenv(mesh.EnvDir, "")
	t.Chdir(dir)
	alice := mintCreds(t, "alice", "--subscribe", "general", "--allow-publish", "general")
	carol := mintCreds(t, "carol", "--subscribe", "general", "--provision")
	d := mesh.Dir{Path: filepath.Join(dir, mesh.DirName)}
	st, err := d.ReadState()
	if err != nil {
		t.Fatal(err)
	}
	const noRow = "recipient had no roster row at send; delivery not confirmed\n"

	for _, tt := range []struct{ name, to, principal string }{
		{"bare name", "nobody_yet", "local.nobody_yet"},
		{"principal", "local.later", "local.later"},
		{"derived owner", "u_abcdefghijklmnopqrstuvwxyz.bob", "u_abcdefghijklmnopqrstuvwxyz.bob"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, "send", "dm", tt.to, "hello", tt.name)
			t.Logf("exit %d; stdout %q; stderr %q", code, stdout, stderr)
			if code != exit.OK || !strings.HasPrefix(stdout, "stored seq ") || !strings.HasSuffix(stdout, "; "+noRow) {
				t.Fatalf("send dm %s: exit %d, stdout %q, stderr %q", tt.to, code, stdout, stderr)
			}
			if want := "no roster row for " + tt.principal; !strings.Contains(stderr, want) {
				t.Errorf("stderr %q does not mention %q", stderr, want)
			}
			m := readDM(t, st.URL, filepath.Join(d.CredsDir("main"), mesh.AdminCredsName+".creds"), tt.principal)
			if m.To != tt.principal || m.From.ID != "local.operator" || m.Parts[0].Text != "hello "+tt.name {
				t.Errorf("stored %+v", m)
			}
		})
	}

	code, stdout, stderr := run(t, "send", "--creds", alice, "dm", "local.carol", "are", "you", "there")
	if code != exit.OK || !strings.HasSuffix(stdout, "; "+noRow) {
		t.Fatalf("send --creds dm local.carol: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	got := make(chan *cotal.Delivery, 1)
	c, err := cotal.Connect(t.Context(), st.URL, cotal.WithCreds(carol), cotal.WithHandler(func(_ context.Context, dl *cotal.Delivery) error {
		select {
		case got <- dl:
		default:
		}
		return nil
	}))
	if err != nil {
		t.Fatalf("carol connects: %v", err)
	}
	defer c.Close(context.WithoutCancel(t.Context()))
	select {
	case dl := <-got:
		if dl.Kind != wire.DeliveryDM || dl.Sender.String() != "local.alice" || dl.Message.Parts[0].Text != "are you there" {
			t.Errorf("carol received %+v from %s: %+v", dl.Kind, dl.Sender, dl.Message)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("carol never received the direct message sent before she first connected")
	}

	// Now carol has a roster row: the same send reports her status instead.
	code, stdout, _ = run(t, "send", "dm", "carol", "again")
	if code != exit.OK || !strings.Contains(stdout, "recipient local.carol (") {
		t.Errorf("send dm carol once she is present: exit %d, %q", code, stdout)
	}
}

// readDM reads the last direct message stored for principal from the DM stream, with the trusted
// admin credential at creds.
func readDM(t *testing.T, url, creds, principal string) *wire.CotalMessage {
	t.Helper()
	nc, err := nats.Connect(url, nats.UserCredentials(creds), nats.CustomInboxPrefix(inboxOf(t, creds)))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	to, err := wire.ParsePrincipal(principal)
	if err != nil {
		t.Fatal(err)
	}
	sp := wire.Space("main")
	cons, err := js.OrderedConsumer(t.Context(), sp.DMStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{meshwire.DMFilter(sp, to)}, DeliverPolicy: jetstream.DeliverLastPolicy,
	})
	if err != nil {
		t.Fatalf("read %s: %v", sp.DMStream(), err)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
	if err != nil {
		t.Fatalf("no direct message stored for %s: %v", principal, err)
	}
	m, err := wire.DecodeMessage(msg.Data())
	if err != nil {
		t.Fatal(err)
	}
	return m
}
