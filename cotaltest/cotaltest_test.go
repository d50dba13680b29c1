package cotaltest_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/cotaltest"
	"github.com/gocotal/cotal/wire"
)

// wait bounds how long a test waits for something that should happen within a round trip or
// two; it only keeps a broken test from hanging.
const wait = 10 * time.Second

func say(s string) []wire.Part { return []wire.Part{wire.TextPart(s)} }

// TestDirectMessage is the test form of the package example.
func TestDirectMessage(t *testing.T) {
	t.Parallel()
	m := cotaltest.StartMesh(t)
	alice := m.Agent(t, "alice")
	bob := m.Agent(t, "bob")
	box := cotaltest.NewRecorder()
	bob.Connect(t, cotal.WithHandler(box.Handle))
	if _, err := alice.Connect(t).DirectMessage(t.Context(), bob.Principal, say("hello bob")); err != nil {
		t.Fatal(err)
	}
	if d := box.Next(t, "hello bob", cotaltest.Text("hello bob")); d.Kind != wire.DeliveryDM || d.Sender != alice.Principal {
		t.Errorf("surfaced as %s from %s", d.Kind, d.Sender)
	}
}

func TestChannelsReadAndPost(t *testing.T) {
	t.Parallel()
	m := cotaltest.StartMesh(t)
	ctx := t.Context()
	alice := m.Agent(t, "alice", cotaltest.Channels("general"))
	bob := m.Agent(t, "bob", cotaltest.Channels("general", "random"))
	aliceBox, bobBox := cotaltest.NewRecorder(), cotaltest.NewRecorder()
	ac := alice.Connect(t, cotal.WithHandler(aliceBox.Handle), cotal.WithJoin("general"))
	bc := bob.Connect(t, cotal.WithHandler(bobBox.Handle), cotal.WithJoin("general"))
	if g := bc.Grant(); !g.CanPost("general") || !g.CanRead("general") || !g.CanPost("random") || g.CanPost("secret") {
		t.Errorf("bob's grant: publish %q, subscribe %q", g.AllowPublish, g.AllowSubscribe)
	}
	if _, err := ac.Post(ctx, "general", say("hi bob")); err != nil {
		t.Fatal(err)
	}
	if d := bobBox.Next(t, "hi bob", cotaltest.Text("hi bob")); d.Kind != wire.DeliveryChannel || d.Channel != "general" || d.Sender != alice.Principal {
		t.Errorf("alice's post surfaced as %s on %q from %s", d.Kind, d.Channel, d.Sender)
	}
	if _, err := bc.Post(ctx, "general", say("hi alice")); err != nil {
		t.Fatal(err)
	}
	aliceBox.Next(t, "hi alice", cotaltest.Text("hi alice"))
}

// TestBrokerEnforcesGrants checks that the permissions are the broker's, not the client's: a
// raw publish that skips the SDK's own check is refused by the broker.
func TestBrokerEnforcesGrants(t *testing.T) {
	t.Parallel()
	m := cotaltest.StartMesh(t)
	ctx := t.Context()
	carol := m.Agent(t, "carol") // no channel
	dave := m.Agent(t, "dave", cotaltest.ReadOnly("general"))
	cc, dc := carol.Connect(t), dave.Connect(t)

	if _, err := cc.Join(ctx, "general"); !errors.Is(err, cotal.ErrJoinRefused) {
		t.Errorf("carol joins general: %v, want ErrJoinRefused", err)
	}
	if _, err := dc.Join(ctx, "general"); err != nil {
		t.Errorf("dave joins general: %v", err)
	}
	for _, c := range []*cotal.Client{cc, dc} {
		if _, err := c.Post(ctx, "general", say("x")); !errors.Is(err, cotal.ErrNotPermitted) {
			t.Errorf("%s posts to general: %v, want ErrNotPermitted", c.Principal(), err)
		}
	}

	subject, err := m.Space().ChatSubject(dave.Principal, "general")
	if err != nil {
		t.Fatal(err)
	}
	if err := dc.Conn().Publish(subject, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		select {
		case err := <-dc.Errors():
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), subject) {
				return
			}
		case <-deadline.C:
			t.Fatalf("the broker did not refuse a raw publish on %s within %s", subject, wait)
		}
	}
}

func TestRoleReceivesTasks(t *testing.T) {
	t.Parallel()
	m := cotaltest.StartMesh(t)
	alice := m.Agent(t, "alice")
	rev := m.Agent(t, "rev", cotaltest.Role("reviewer"))
	box := cotaltest.NewRecorder()
	rev.Connect(t, cotal.WithHandler(box.Handle))
	if g := rev.Connect(t, cotal.WithPresence(false)).Grant(); g.Role != "reviewer" {
		t.Errorf("grant role %q", g.Role)
	}
	if _, err := alice.Connect(t).Ask(t.Context(), "reviewer", say("please review")); err != nil {
		t.Fatal(err)
	}
	if d := box.Next(t, "please review", cotaltest.Text("please review")); d.Kind != wire.DeliveryAnycast {
		t.Errorf("the task surfaced as %s", d.Kind)
	}
}

// TestDaemons checks that the delivery daemon runs by default, and that WithoutDaemons leaves it
// out.
func TestDaemons(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		opts    []cotaltest.Option
		durable bool
	}{
		{"default", nil, true},
		{"without", []cotaltest.Option{cotaltest.WithoutDaemons()}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := cotaltest.StartMesh(t, tt.opts...)
			c := m.Agent(t, "alice", cotaltest.Channels("general")).Connect(t, cotal.WithHandler(cotaltest.NewRecorder().Handle))
			res, err := c.Join(t.Context(), "general")
			if err != nil {
				t.Fatal(err)
			}
			if res.Durable != tt.durable || (res.Backstop == "") != tt.durable {
				t.Errorf("join = durable %t, backstop %q; want durable %t", res.Durable, res.Backstop, tt.durable)
			}
		})
	}
}

func TestWithSpace(t *testing.T) {
	t.Parallel()
	m := cotaltest.StartMesh(t, cotaltest.WithSpace("lab"))
	c := m.Agent(t, "alice").Connect(t)
	if m.Space() != "lab" || c.Space() != "lab" {
		t.Errorf("mesh space %q, client space %q", m.Space(), c.Space())
	}
}

// TestReissueRevokes: issuing a name again is a restart; the earlier credential stops working.
func TestReissueRevokes(t *testing.T) {
	t.Parallel()
	m := cotaltest.StartMesh(t)
	first := m.Agent(t, "alice")
	second := m.Agent(t, "alice")
	if first.Principal != second.Principal || bytes.Equal(first.Creds, second.Creds) {
		t.Fatalf("reissue: %s then %s", first.Principal, second.Principal)
	}
	_, err := cotal.Connect(t.Context(), m.URL(), cotal.WithCredsData(first.Creds), cotal.WithConnectAttempts(1))
	if !errors.Is(err, cotal.ErrNotPermitted) {
		t.Errorf("connect with the revoked credential: %v, want ErrNotPermitted", err)
	}
	second.Connect(t)
}

func TestInvalidInput(t *testing.T) {
	t.Parallel()
	m := cotaltest.StartMesh(t, cotaltest.WithoutDaemons())
	for _, tt := range []struct {
		name  string
		agent string
		opts  []cotaltest.AgentOption
		want  []error
	}{
		{"a space in the name", "alice smith", nil, []error{wire.ErrInvalid}},
		{"a dot in the name", "team.alice", nil, []error{wire.ErrInvalid}},
		{"empty name", "", nil, []error{wire.ErrInvalid}},
		{"a pattern to post to", "alice", []cotaltest.AgentOption{cotaltest.Channels("team.>")}, []error{cotal.ErrInvalidOption, wire.ErrInvalid}},
		{"an empty segment", "alice", []cotaltest.AgentOption{cotaltest.ReadOnly("team..x")}, []error{cotal.ErrInvalidOption, wire.ErrInvalid}},
		{"empty role", "alice", []cotaltest.AgentOption{cotaltest.Role("")}, []error{cotal.ErrInvalidOption, wire.ErrInvalid}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := m.Issue(t.Context(), tt.agent, tt.opts...)
			for _, want := range tt.want {
				if !errors.Is(err, want) {
					t.Errorf("Issue(%q) = %v, want %v", tt.agent, err, want)
				}
			}
		})
	}
	for i, opt := range []cotaltest.Option{cotaltest.WithSpace("a.b"), cotaltest.WithSpace(""), cotaltest.WithLogger(nil)} {
		m, err := cotaltest.NewMesh(t.Context(), opt)
		if err == nil {
			t.Errorf("NewMesh with bad option %d started a mesh", i)
			if err := m.Close(); err != nil {
				t.Error(err)
			}
			continue
		}
		if !errors.Is(err, cotal.ErrInvalidOption) {
			t.Errorf("NewMesh with bad option %d = %v, want ErrInvalidOption", i, err)
		}
	}
}

func TestAgentKeepsCredsOutOfLogs(t *testing.T) {
	t.Parallel()
	m := cotaltest.StartMesh(t, cotaltest.WithoutDaemons())
	a := m.Agent(t, "alice")
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("issued", "agent", a)
	var secrets []string // the user JWT and its seed
	for _, f := range strings.Fields(string(a.Creds)) {
		if strings.HasPrefix(f, "eyJ") || strings.HasPrefix(f, "SU") {
			secrets = append(secrets, f)
		}
	}
	if len(secrets) != 2 {
		t.Fatalf("found %d secrets in the creds, want the jwt and the seed", len(secrets))
	}
	for _, out := range []string{buf.String(), fmt.Sprint(a), fmt.Sprintf("%+v", a)} {
		if !strings.Contains(out, "local.alice") || strings.Contains(out, secrets[0]) || strings.Contains(out, secrets[1]) {
			t.Errorf("the agent prints as %q", out)
		}
	}
}

// TestCloseStopsEverything: once a test's mesh is cleaned up its URL refuses connections and the
// goroutines it started (broker, daemons, clients) are gone.
func TestCloseStopsEverything(t *testing.T) {
	t.Parallel()
	before := runtime.NumGoroutine()
	var url string
	t.Run("mesh", func(t *testing.T) {
		m := cotaltest.StartMesh(t)
		url = m.URL()
		bob := m.Agent(t, "bob", cotaltest.Channels("general"))
		bob.Connect(t, cotal.WithHandler(cotaltest.NewRecorder().Handle), cotal.WithJoin("general"))
	})
	if nc, err := nats.Connect(url, nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Errorf("%s still accepts connections after cleanup", url)
	}
	deadline := time.Now().Add(wait)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before the mesh, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}

	m, err := cotaltest.NewMesh(t.Context(), cotaltest.WithoutDaemons())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("a second Close = %v", err)
	}
	if _, err := m.Issue(t.Context(), "alice"); !errors.Is(err, cotaltest.ErrClosed) {
		t.Errorf("Issue on a closed mesh = %v, want ErrClosed", err)
	}
}
