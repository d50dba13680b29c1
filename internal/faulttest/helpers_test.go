package faulttest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// space is the space every test's mesh serves.
const space = mesh.DefaultSpace

// soak reports whether COTAL_SOAK=1 asks for the full counts.
func soak() bool { return os.Getenv("COTAL_SOAK") == "1" }

// count returns full under COTAL_SOAK=1 and quick otherwise.
func count(quick, full int) int {
	if soak() {
		return full
	}
	return quick
}

// bounded returns a context that ends after d (and with the test), for a test whose every wait
// must end.
func bounded(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// upWait bounds how long `cotal up` may take to record itself as running.
const upWait = 90 * time.Second

// meshProc is a `cotal up` child process and the directory it runs from. kill and restart break
// and revive it on the same directory and port.
type meshProc struct {
	t     *testing.T
	root  string // passed as --dir
	dir   mesh.Dir
	extra []string
	port  int
	url   string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	runs   int
}

// startMesh runs `cotal up --dir D --port 0` with extra flags and waits until it is up. Cleanup
// stops it.
func startMesh(t *testing.T, extra ...string) *meshProc {
	t.Helper()
	root := t.TempDir()
	m := &meshProc{t: t, root: root, dir: mesh.Dir{Path: filepath.Join(root, mesh.DirName)}, extra: extra}
	m.start(0)
	t.Cleanup(m.stop)
	return m
}

// logPath is where the n-th run of the mesh logs.
func (m *meshProc) logPath(n int) string { return filepath.Join(m.root, fmt.Sprintf("up.%d.log", n)) }

// start runs `cotal up` on port (0: any free port) and waits until the state file names it.
func (m *meshProc) start(port int) {
	t := m.t
	t.Helper()
	m.mu.Lock()
	m.runs++
	n := m.runs
	m.mu.Unlock()
	logf, err := os.Create(m.logPath(n))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close() // the child holds its own descriptor
	args := append([]string{"up", "--dir", m.root, "--port", strconv.Itoa(port)}, m.extra...)
	cmd := exec.Command(cotalBin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }() // reaps it: a zombie would look alive to ReadState
	m.mu.Lock()
	m.cmd, m.exited = cmd, exited
	m.mu.Unlock()
	deadline := time.Now().Add(upWait)
	for {
		st, err := m.dir.ReadState()
		if err == nil && st.PID == cmd.Process.Pid {
			m.url = st.URL
			u, err := url.Parse(st.URL)
			if err != nil {
				t.Fatal(err)
			}
			if m.port, err = strconv.Atoi(u.Port()); err != nil {
				t.Fatalf("the mesh URL %s has no port: %v", st.URL, err)
			}
			return
		}
		select {
		case <-exited:
			t.Fatalf("cotal up (run %d) exited before it came up:\n%s", n, m.logTail(n))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("cotal up (run %d) did not come up within %s (last: %v):\n%s", n, upWait, err, m.logTail(n))
		}
	}
}

// logTail returns the end of run n's log, for a failure message.
func (m *meshProc) logTail(n int) string {
	raw, _ := os.ReadFile(m.logPath(n))
	if len(raw) > 4000 {
		raw = raw[len(raw)-4000:]
	}
	return string(raw)
}

// kill sends SIGKILL to the running mesh and waits until the process is gone.
func (m *meshProc) kill() {
	m.t.Helper()
	m.mu.Lock()
	cmd, exited := m.cmd, m.exited
	m.mu.Unlock()
	if err := cmd.Process.Kill(); err != nil {
		m.t.Fatalf("kill -9 the mesh: %v", err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		m.t.Fatal("the killed mesh did not exit")
	}
}

// restart runs `cotal up` again on the same directory and the same port.
func (m *meshProc) restart() {
	m.t.Helper()
	m.start(m.port)
}

// stop interrupts the running mesh (as Ctrl-C does) and waits for it, killing it if it hangs.
func (m *meshProc) stop() {
	m.mu.Lock()
	cmd, exited := m.cmd, m.exited
	m.mu.Unlock()
	select {
	case <-exited:
		return
	default:
	}
	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case <-exited:
	case <-time.After(45 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		m.t.Errorf("cotal up did not stop on an interrupt within 45s")
	}
	if m.t.Failed() {
		m.t.Logf("mesh log (last run):\n%s", m.logTail(m.runs))
	}
}

// cotal runs the cotal binary with args against this mesh's directory and returns its exit code
// and output.
func (m *meshProc) cotal(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	m.t.Helper()
	cmd := exec.CommandContext(ctx, cotalBin, args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		m.t.Fatalf("cotal %s: %v", strings.Join(args, " "), err)
	}
	return code, out.String(), errOut.String()
}

// keyring opens the mesh's keyring.
func (m *meshProc) keyring() *authority.Keyring {
	m.t.Helper()
	kr, err := m.dir.OpenKeyring()
	if err != nil {
		m.t.Fatal(err)
	}
	return kr
}

// ledger opens a ledger on the mesh's auth store from the test process, as the CLI does.
func (m *meshProc) ledger(ctx context.Context) *ledger.Ledger {
	m.t.Helper()
	l, err := ledger.Open(ctx, m.url, m.keyring(), space)
	if err != nil {
		m.t.Fatalf("open the ledger: %v", err)
	}
	m.t.Cleanup(l.Close)
	return l
}

// rawAuth dials a ledger-profile connection with a jetstream handle on the auth bucket: what an
// admin holding the mesh's keys can write with, bypassing every check of the auth store.
func (m *meshProc) rawAuth(ctx context.Context) (*nats.Conn, jetstream.KeyValue) {
	m.t.Helper()
	cred, err := ledger.Mint(m.keyring(), ledger.Request{Space: space, Profile: authority.ProfileLedger, Name: "faulttest_admin"})
	if err != nil {
		m.t.Fatal(err)
	}
	nc, err := dial.As(ctx, m.url, cred)
	if err != nil {
		m.t.Fatal(err)
	}
	m.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		m.t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, string(meshwire.AuthBucket(space)))
	if err != nil {
		m.t.Fatal(err)
	}
	return nc, kv
}

// provisioner dials a provisioner-profile connection, which may read the agents' durables.
func (m *meshProc) provisioner(ctx context.Context) jetstream.JetStream {
	m.t.Helper()
	cred, err := ledger.MintProvisioner(m.keyring(), space)
	if err != nil {
		m.t.Fatal(err)
	}
	nc, err := dial.As(ctx, m.url, cred)
	if err != nil {
		m.t.Fatal(err)
	}
	m.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		m.t.Fatal(err)
	}
	return js
}

// chatReadBatch is how many stored posts storedPosts fetches at a time.
const chatReadBatch = 256

// storedPosts returns the ids of the posts on channel that the space's CHAT stream still stores,
// in stream order, and CHAT's max_msgs_per_subject: how many posts it keeps per sender and
// channel (SPEC §8, discard old). It reads them through an ordered consumer on an observer
// credential, the least a CHAT read needs: consumers on CHAT, none on the private streams.
func (m *meshProc) storedPosts(ctx context.Context, channel string) (stored []string, perSubject int64) {
	m.t.Helper()
	cred, err := ledger.Mint(m.keyring(), ledger.Request{Space: space, Profile: authority.ProfileObserver, Name: "faulttest_observer"})
	if err != nil {
		m.t.Fatal(err)
	}
	nc, err := dial.As(ctx, m.url, cred)
	if err != nil {
		m.t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		m.t.Fatal(err)
	}
	filter, err := space.ChatFilter(channel)
	if err != nil {
		m.t.Fatal(err)
	}
	st, err := js.Stream(ctx, space.ChatStream())
	if err != nil {
		m.t.Fatalf("read CHAT's config: %v", err)
	}
	cons, err := js.OrderedConsumer(ctx, space.ChatStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		m.t.Fatalf("an ordered consumer on CHAT: %v", err)
	}
	defer func() { _ = js.DeleteConsumer(context.WithoutCancel(ctx), space.ChatStream(), cons.CachedInfo().Name) }()
	for left := cons.CachedInfo().NumPending; left > 0; {
		batch, err := cons.Fetch(int(min(left, chatReadBatch)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			m.t.Fatalf("read CHAT: %v", err)
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			cm, err := wire.DecodeMessage(msg.Data())
			if err != nil {
				m.t.Fatalf("CHAT stores a post on %s that does not parse: %v", msg.Subject(), err)
			}
			stored = append(stored, cm.ID)
		}
		if err := batch.Error(); err != nil {
			m.t.Fatalf("read CHAT: %v", err)
		}
		if got == 0 {
			m.t.Fatalf("CHAT handed over %d of the posts it stores on %s", len(stored), filter)
		}
		left -= uint64(got)
	}
	return stored, st.CachedInfo().Config.MaxMsgsPerSubject
}

// retainedPosts returns the posts of sent (the ids of one sender's posts on channel, in send
// order) that CHAT still stores, in send order: what the delivery contract still owes each
// member. One sender on one channel is one subject, of which CHAT keeps the newest perSubject;
// the posts it evicted are counted and logged, and the test fails if it evicted any though no
// more than perSubject were sent.
func (m *meshProc) retainedPosts(ctx context.Context, channel string, sent []string) (kept []string) {
	m.t.Helper()
	stored, perSubject := m.storedPosts(ctx, channel)
	in := make(map[string]bool, len(stored))
	for _, id := range stored {
		in[id] = true
	}
	var evicted []string
	for _, id := range sent {
		if in[id] {
			kept = append(kept, id)
		} else {
			evicted = append(evicted, id)
		}
	}
	switch {
	case len(evicted) > 0 && int64(len(sent)) <= perSubject:
		m.t.Errorf("CHAT lost %d of %d posts though it keeps %d per subject (%s): %q", len(evicted), len(sent), perSubject, positions(sent, evicted), sample(evicted, 10))
	case len(evicted) > 0:
		m.t.Logf("%d of %d posts evicted by CHAT's %d-per-subject retention (%s); %d stored", len(evicted), len(sent), perSubject, positions(sent, evicted), len(kept))
	default:
		m.t.Logf("all %d posts stored in CHAT (it keeps %d per subject)", len(sent), perSubject)
	}
	return kept
}

// startAgent issues and provisions an agent credential for a fresh lifecycle of local.<name>, as
// `cotal mint --provision` and `cotal agent` do.
func startAgent(ctx context.Context, t *testing.T, l *ledger.Ledger, req ledger.Request) *authority.Credential {
	t.Helper()
	cred, _, err := l.StartAgent(ctx, req)
	if err != nil {
		t.Fatalf("start agent %s: %v", req.Name, err)
	}
	return cred
}

// connect connects an SDK client on cred; cleanup closes it.
func connect(ctx context.Context, t *testing.T, url string, cred *authority.Credential, opts ...cotal.Option) *cotal.Client {
	t.Helper()
	c, err := cotal.Connect(ctx, url, append([]cotal.Option{cotal.WithCredsData(cred.Creds), cotal.WithConnectAttempts(10)}, opts...)...)
	if err != nil {
		t.Fatalf("connect %s: %v", cred.Principal, err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Close(cctx)
	})
	return c
}

// tally is a handler that counts every delivery it is handed by message id: the test's own
// de-duplication, above the SDK's. It is safe for concurrent use.
type tally struct {
	mu      sync.Mutex
	seen    map[string]int // guarded by mu
	first   map[string]time.Time
	total   int
	changed chan struct{}
}

func newTally() *tally {
	return &tally{seen: map[string]int{}, first: map[string]time.Time{}, changed: make(chan struct{}, 1)}
}

// handle is a cotal.Handler: it records d and acknowledges it.
func (ta *tally) handle(_ context.Context, d *cotal.Delivery) error {
	ta.mu.Lock()
	id := d.Message.ID
	if ta.seen[id] == 0 {
		ta.first[id] = time.Now()
	}
	ta.seen[id]++
	ta.total++
	ta.mu.Unlock()
	select {
	case ta.changed <- struct{}{}:
	default:
	}
	return nil
}

// has reports whether id arrived.
func (ta *tally) has(id string) bool {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	return ta.seen[id] > 0
}

// missing returns the ids of want that have not arrived.
func (ta *tally) missing(want []string) []string {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	var out []string
	for _, id := range want {
		if ta.seen[id] == 0 {
			out = append(out, id)
		}
	}
	return out
}

// duplicates returns how many deliveries of the ids in want repeated one already handed over.
func (ta *tally) duplicates(want []string) int {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	n := 0
	for _, id := range want {
		if c := ta.seen[id]; c > 1 {
			n += c - 1
		}
	}
	return n
}

// lastArrival returns when the last of want first arrived (zero if one is missing).
func (ta *tally) lastArrival(want []string) time.Time {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	var last time.Time
	for _, id := range want {
		at, ok := ta.first[id]
		if !ok {
			return time.Time{}
		}
		if at.After(last) {
			last = at
		}
	}
	return last
}

// waitAll waits until every id of want arrived or ctx ends, and returns the ones still missing.
func (ta *tally) waitAll(ctx context.Context, want []string) []string {
	for {
		miss := ta.missing(want)
		if len(miss) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return miss
		case <-ta.changed:
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// positions describes where the ids of miss sit in want (its send order): how many, and the
// first and last position, for a failure message that shows whether the oldest went missing.
func positions(want, miss []string) string {
	at := make(map[string]int, len(want))
	for i, id := range want {
		at[id] = i
	}
	first, last := len(want), -1
	for _, id := range miss {
		first, last = min(first, at[id]), max(last, at[id])
	}
	if last < 0 {
		return "none"
	}
	return fmt.Sprintf("%d between positions %d and %d of %d in send order", len(miss), first, last, len(want))
}

// sample returns at most n of ids, for a failure message.
func sample(ids []string, n int) []string {
	if len(ids) <= n {
		return ids
	}
	return ids[:n]
}

// child is a child process of the test: a blocking agent or a `cotal deliver` daemon.
type child struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	lines  chan childLine // a blocking agent's stdout, decoded
	log    string         // stderr file
}

// startChild starts cmd as a child process whose stderr goes to a log file in dir; with
// decode, its stdout is decoded as childLine values onto lines. Cleanup kills it.
func startChild(t *testing.T, name, dir string, cmd *exec.Cmd, decode bool) *child {
	t.Helper()
	c := &child{t: t, name: name, cmd: cmd, exited: make(chan struct{}), lines: make(chan childLine, 4096), log: filepath.Join(dir, name+".log")}
	logf, err := os.Create(c.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stderr = logf
	var stdout io.ReadCloser
	if decode {
		if stdout, err = cmd.StdoutPipe(); err != nil {
			t.Fatal(err)
		}
	} else {
		cmd.Stdout = logf
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if decode {
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				var l childLine
				if json.Unmarshal(sc.Bytes(), &l) == nil {
					c.lines <- l
				}
			}
		}()
	}
	go func() { _ = cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() {
		c.kill()
		if t.Failed() {
			raw, _ := os.ReadFile(c.log)
			if len(raw) > 3000 {
				raw = raw[len(raw)-3000:]
			}
			t.Logf("%s log:\n%s", name, raw)
		}
	})
	return c
}

// kill sends SIGKILL and waits for the process to be gone; a process already gone is fine.
func (c *child) kill() {
	select {
	case <-c.exited:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		c.t.Errorf("%s did not exit after SIGKILL", c.name)
	}
}

// next waits for the child's next stdout line of event ev.
func (c *child) next(ctx context.Context, ev string) (childLine, error) {
	for {
		select {
		case l := <-c.lines:
			if l.Event == ev {
				return l, nil
			}
		case <-c.exited:
			return childLine{}, fmt.Errorf("%s exited before printing %q", c.name, ev)
		case <-ctx.Done():
			return childLine{}, fmt.Errorf("%s printed no %q: %w", c.name, ev, ctx.Err())
		}
	}
}

// startBlockingAgent runs the test binary as a blocking agent (childBlockingAgent) on cred.
func startBlockingAgent(ctx context.Context, t *testing.T, dir, url string, cred *authority.Credential, name string) *child {
	t.Helper()
	path := filepath.Join(dir, name+".creds")
	if err := os.WriteFile(path, cred.Creds, 0o600); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envChild+"="+childBlockingAgent, "COTAL_FAULTTEST_CREDS="+path, "COTAL_FAULTTEST_URL="+url)
	c := startChild(t, name, dir, cmd, true)
	if _, err := c.next(ctx, "ready"); err != nil {
		t.Fatal(err)
	}
	return c
}

// readLease reads the delivery daemon's lease row on nc (nil when no daemon holds it).
func readLease(ctx context.Context, nc *nats.Conn) (*meshwire.DeliveryLease, error) {
	e, err := kvget.Get(ctx, nc, meshwire.DeliveryBucket(space), meshwire.LeaseKey(0))
	if errors.Is(err, kvget.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if e.Deleted {
		return nil, nil
	}
	var l meshwire.DeliveryLease
	if err := json.Unmarshal(e.Value, &l); err != nil {
		return nil, fmt.Errorf("lease row %q: %w", e.Value, err)
	}
	return &l, nil
}

// waitFor polls cond every interval until it holds or ctx ends.
func waitFor(ctx context.Context, interval time.Duration, cond func() bool) bool {
	for {
		if cond() {
			return true
		}
		select {
		case <-ctx.Done():
			return cond()
		case <-time.After(interval):
		}
	}
}

// ids returns the ids of msgs.
func ids(msgs []*wire.CotalMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

// textMessages builds n messages with preset ids (so a retried send is the same message, which the
// stream de-duplicates by Nats-Msg-Id): to a principal, or to a channel.
func textMessages(n int, prefix string, to wire.Principal, channel string) []*wire.CotalMessage {
	out := make([]*wire.CotalMessage, n)
	for i := range out {
		m := &wire.CotalMessage{ID: wire.NewMessageID(), Parts: []wire.Part{wire.TextPart(fmt.Sprintf("%s %d", prefix, i))}}
		if channel != "" {
			m.Channel = channel
		} else {
			m.To = to.String()
		}
		out[i] = m
	}
	return out
}

// refused reports whether the broker refuses a connection on cred.
func refused(ctx context.Context, url string, cred *authority.Credential) (bool, error) {
	nc, err := dial.As(ctx, url, cred, nats.NoReconnect(), nats.MaxReconnects(0))
	if err == nil {
		nc.Close()
		return false, nil
	}
	if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAuthExpired) ||
		strings.Contains(strings.ToLower(err.Error()), "authorization") {
		return true, nil
	}
	return false, err
}

// contains reports whether s contains every one of subs.
func containsAll(s string, subs ...string) []string {
	var missing []string
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			missing = append(missing, sub)
		}
	}
	slices.Sort(missing)
	return missing
}
