package cli

import (
	"encoding/json"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/cli/mint"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// mcpServer is one `cotal mcp` run in this process, driven by an MCP client.
type mcpServer struct {
	cs     *mcpsdk.ClientSession
	done   chan int
	stderr *iostreams.Buffer
}

// serveMCP starts `cotal mcp` with args on the mesh in dir and connects a client to it.
func serveMCP(t *testing.T, dir string, args ...string) *mcpServer {
	t.Helper()
	toServer, serverIn := io.Pipe()
	serverOut, fromServer := io.Pipe()
	s := &mcpServer{done: make(chan int, 1), stderr: &iostreams.Buffer{}}
	mcpIO := &iostreams.IOStreams{In: toServer, Out: fromServer, ErrOut: s.stderr}
	go func() {
		s.done <- Main(t.Context(), mcpIO, append([]string{"mcp", "--dir", dir}, args...))
		fromServer.Close()
	}()
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).
		Connect(t.Context(), &mcpsdk.IOTransport{Reader: serverOut, Writer: serverIn}, nil)
	if err != nil {
		t.Fatalf("connect to cotal mcp: %v", err)
	}
	s.cs = cs
	return s
}

// call calls a tool and returns its text.
func (s *mcpServer) call(t *testing.T, tool string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := s.cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcpsdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// stop closes the client and waits for the server to exit 0.
func (s *mcpServer) stop(t *testing.T) {
	t.Helper()
	s.cs.Close()
	select {
	case code := <-s.done:
		if code != exit.OK {
			t.Fatalf("cotal mcp exit %d: %s", code, s.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("cotal mcp did not exit when its client went away")
	}
}

// inboxUntil reads cotal_inbox until it holds want, for a DM still on its way.
func (s *mcpServer) inboxUntil(t *testing.T, want string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, _ := s.call(t, "cotal_inbox", nil)
		if strings.Contains(got, want) || time.Now().After(deadline) {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestAgentKeepsItsMail: an agent run by name keeps its lifecycle across restarts of its process,
// so a DM sent while no process ran it is shown once by the next run and never again; a DM to a
// name that never ran reaches its first run.
func TestAgentKeepsItsMail(t *testing.T) {
	meshtest.Long(t, "runs a mesh and agent processes one after another")
	dir := upMesh(t)
	first := serveMCP(t, dir, "--name", "alice", "--subscribe", "general")
	first.stop(t)
	if code, _, stderr := run(t, "send", "dm", "alice", "while-down", "--dir", dir); code != exit.OK {
		t.Fatalf("send dm alice (exit %d): %s", code, stderr)
	}
	second := serveMCP(t, dir, "--name", "alice", "--subscribe", "general")
	if got := second.inboxUntil(t, "while-down"); strings.Count(got, "while-down") != 1 {
		t.Fatalf("the restarted agent's inbox:\n%s", got)
	}
	if !strings.Contains(second.stderr.String(), "runs on its lifecycle, resumed") {
		t.Errorf("the restarted server did not say it resumed: %s", second.stderr.String())
	}
	second.stop(t)
	third := serveMCP(t, dir, "--name", "alice", "--subscribe", "general")
	if got, _ := third.call(t, "cotal_inbox", nil); strings.Contains(got, "while-down") {
		t.Errorf("a DM shown once was shown again:\n%s", got)
	}
	third.stop(t)

	// --fresh starts a new lifecycle: what was sent to the old one is not shown.
	if code, _, stderr := run(t, "send", "dm", "alice", "to-the-old-one", "--dir", dir); code != exit.OK {
		t.Fatalf("send dm alice (exit %d): %s", code, stderr)
	}
	fresh := serveMCP(t, dir, "--name", "alice", "--fresh")
	time.Sleep(time.Second)
	if got, _ := fresh.call(t, "cotal_inbox", nil); strings.Contains(got, "to-the-old-one") {
		t.Errorf("--fresh showed the old lifecycle's DM:\n%s", got)
	}
	fresh.stop(t)

	// A DM to a name that never ran reaches the name's first run.
	if code, _, stderr := run(t, "send", "dm", "newbie", "first", "--dir", dir); code != exit.OK {
		t.Fatalf("send dm newbie (exit %d): %s", code, stderr)
	}
	out, _, stop := background(t, "agent", "--dir", dir, "--name", "newbie", "--json")
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(out.String(), `"first"`) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if code := stop(); code != exit.OK {
		t.Errorf("cotal agent --name newbie exit %d", code)
	}
	if !strings.Contains(out.String(), `"first"`) || !strings.Contains(out.String(), `"kind":"dm"`) {
		t.Errorf("the first run of newbie did not show the DM sent before it ran:\n%s", out)
	}
}

// TestOneProcessPerAgent: a second process for a name that is running is refused, naming the
// first's pid; with --takeover the first lets go, and its tools say who took it over.
func TestOneProcessPerAgent(t *testing.T) {
	meshtest.Long(t, "runs a mesh and two agent processes")
	dir := upMesh(t)
	first := serveMCP(t, dir, "--name", "dave")
	if got, _ := first.call(t, "cotal_connection_status", nil); !strings.HasPrefix(got, "connected") {
		t.Fatalf("the first's status: %s", got)
	}
	code, _, stderr := run(t, "mcp", "--dir", dir, "--name", "dave")
	if code == exit.OK || !strings.Contains(stderr, "local.dave is already run by pid "+strconv.Itoa(os.Getpid())) || !strings.Contains(stderr, "--takeover") {
		t.Fatalf("a second cotal mcp --name dave (exit %d): %s", code, stderr)
	}
	second := serveMCP(t, dir, "--name", "dave", "--takeover")
	defer second.stop(t)
	if got, _ := second.call(t, "cotal_connection_status", nil); !strings.HasPrefix(got, "connected") {
		t.Errorf("the taker's status: %s", got)
	}
	got, isErr := first.call(t, "cotal_connection_status", nil)
	if !strings.HasPrefix(got, "taken over by pid "+strconv.Itoa(os.Getpid())) || isErr {
		t.Errorf("the first's status after the takeover: %q (error %v)", got, isErr)
	}
	if got, isErr := first.call(t, "cotal_send", map[string]any{"channel": "general", "text": "still me?"}); !isErr || !strings.Contains(got, "taken over by") {
		t.Errorf("the first's send after the takeover: %q (error %v)", got, isErr)
	}
	first.stop(t)
}

// TestReceiversShowTheSubjectsChannel: a post whose payload names another channel than the subject
// it was published on is shown under the subject's channel, which `agent --json` carries beside
// the payload.
func TestReceiversShowTheSubjectsChannel(t *testing.T) {
	meshtest.Long(t, "runs a mesh and an agent")
	dir := upMesh(t)
	code, out, stderr := run(t, "mint", "alice", "--dir", dir, "--subscribe", "general", "--json")
	if code != exit.OK {
		t.Fatalf("mint alice (exit %d): %s", code, stderr)
	}
	var minted struct{ Creds, Servers string }
	if err := json.Unmarshal([]byte(out), &minted); err != nil {
		t.Fatal(err)
	}
	got, agentErr, stop := background(t, "agent", "--dir", dir, "--name", "bob", "--subscribe", "general", "--json")
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(agentErr.String(), "Ctrl-C to stop") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	nc, err := nats.Connect(minted.Servers, nats.UserCredentials(minted.Creds), nats.CustomInboxPrefix(inboxOf(t, minted.Creds)))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	p, _ := wire.NewPrincipal("local", "alice")
	m := &wire.CotalMessage{ID: wire.NewMessageID(), Space: "main", From: wire.EndpointRef{ID: p.String(), Name: "alice"}, TS: wire.MillisOf(time.Now()),
		Channel: "random", Parts: []wire.Part{wire.TextPart("which channel?")}}
	raw, err := wire.EncodeMessage(m, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("cotal.main.chat.local.alice.general", raw); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(got.String(), "which channel?") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	var line struct {
		Channel, Sender string
		Message         struct{ Channel string }
	}
	if err := json.Unmarshal([]byte(strings.SplitN(got.String(), "\n", 2)[0]), &line); err != nil {
		t.Fatalf("agent --json printed %q: %v", got, err)
	}
	if line.Channel != "general" || line.Sender != "local.alice" || line.Message.Channel != "random" {
		t.Errorf("the post surfaced as channel %q from %q (payload channel %q); want general from local.alice", line.Channel, line.Sender, line.Message.Channel)
	}
}

// TestQuarantineNotice: a post whose from.id is not its sender, published raw with a minted
// credential, is deleted, its sender finds the warden's notice naming the cause on its own DM
// durable, and `cotal status` counts it by cause.
func TestQuarantineNotice(t *testing.T) {
	meshtest.Long(t, "runs a mesh with its warden")
	dir := upMesh(t)
	code, out, stderr := run(t, "mint", "alice", "--dir", dir, "--subscribe", "general", "--provision", "--json")
	if code != exit.OK {
		t.Fatalf("mint alice (exit %d): %s", code, stderr)
	}
	var minted mint.Result
	if err := json.Unmarshal([]byte(out), &minted); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(minted.Servers, nats.UserCredentials(minted.Creds), nats.CustomInboxPrefix(minted.InboxPrefix))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	forged := `{"id":"forged-1","ts":1733400000000,"space":"main","from":{"id":"local.mallory","name":"mallory"},"channel":"general","parts":[{"kind":"text","text":"not me"}]}`
	if _, err := js.Publish(t.Context(), "cotal.main.chat.local.alice.general", []byte(forged)); err != nil {
		t.Fatalf("the broker refused the raw post: %v", err)
	}
	dm, err := js.Consumer(t.Context(), "DM_main", "dm_local-alice-"+minted.LifecycleUID)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := dm.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var notice string
	for msg := range batch.Messages() {
		notice = msg.Subject() + " " + string(msg.Data())
		_ = msg.Ack()
	}
	if !strings.HasPrefix(notice, "cotal.main.inst.local.alice.local.cotal_warden ") || !strings.Contains(notice, "sender-mismatch") || !strings.Contains(notice, "forged-1") {
		t.Fatalf("alice's notice: %q", notice)
	}
	code, out, stderr = run(t, "status", "--dir", dir, "--json")
	if code != exit.OK {
		t.Fatalf("status (exit %d): %s", code, stderr)
	}
	var rep struct {
		Spaces []struct{ Quarantined map[string]int }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Spaces) == 0 || rep.Spaces[0].Quarantined["sender-mismatch"] != 1 {
		t.Errorf("status counts %+v (%v), want one sender-mismatch", rep.Spaces, err)
	}
}
