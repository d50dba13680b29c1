package callout_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/broker"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/userauth/callout"
	"github.com/gocotal/cotal/wire"
)

// The callout on a real broker in operator mode: space "main" runs a callout service, space
// "idle" has its auth account but no service.

const owner = "u_aaaaaaaaaaaaaaaaaaaaaaaaaa"

// mesh is a broker serving two spaces in user-auth mode.
type mesh struct {
	url              string
	kr               *authority.Keyring
	main, idle       *authority.SpaceKeys
	mainAuth         *authority.CalloutKeys
	sentinel, idleSt string // creds files
	callout          string
}

func startMesh(t *testing.T) *mesh {
	t.Helper()
	dir := t.TempDir()
	kr, err := authority.OpenKeyring(filepath.Join(dir, "keys"))
	if err != nil {
		t.Fatal(err)
	}
	m := &mesh{kr: kr}
	tr := broker.Trust{}
	if tr.OperatorJWT, err = kr.OperatorJWT(); err != nil {
		t.Fatal(err)
	}
	if tr.SystemAccount, err = kr.SystemAccountJWT(); err != nil {
		t.Fatal(err)
	}
	space := func(name wire.Space) (*authority.SpaceKeys, *authority.CalloutKeys) {
		sk, err := kr.Space(name)
		if err != nil {
			t.Fatal(err)
		}
		ck, err := kr.Callout(name)
		if err != nil {
			t.Fatal(err)
		}
		data, store, err := kr.SpaceAccountJWTs(sk)
		if err != nil {
			t.Fatal(err)
		}
		auth, err := kr.AuthAccountJWT(ck, sk)
		if err != nil {
			t.Fatal(err)
		}
		tr.Accounts = append(tr.Accounts, data, store, auth)
		return sk, ck
	}
	var idleAuth *authority.CalloutKeys
	m.main, m.mainAuth = space("main")
	m.idle, idleAuth = space("idle")
	m.sentinel = writeCreds(t, m.mainAuth.SentinelCreds)
	m.idleSt = writeCreds(t, idleAuth.SentinelCreds)
	m.callout = writeCreds(t, m.mainAuth.CalloutCreds)

	conf, err := broker.RenderAuth(broker.Config{StoreDir: filepath.Join(dir, "js")}, tr)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(path, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := broker.Start(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("stop broker: %v", err)
		}
	})
	m.url = s.ClientURL()
	return m
}

func writeCreds(t *testing.T, creds func() ([]byte, error)) string {
	t.Helper()
	b, err := creds()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(t.TempDir(), "*.creds")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// authorize is the test's decision: "good-<actor>" and "brief-<actor>" mint an observer for the
// actor, living a minute or two seconds; "other-user" and "other-account" mint for the wrong
// user key or account; anything else is refused.
func (m *mesh) authorize(_ context.Context, r callout.Request) (string, error) {
	conn, err := wire.ParseConnID(r.ConnName)
	if err != nil {
		return "", err
	}
	mint := func(sk *authority.SpaceKeys, actor string, life time.Duration, user string) (string, error) {
		p, err := wire.NewPrincipal(owner, actor)
		if err != nil {
			return "", err
		}
		cred, err := sk.SignUser(authority.MintRequest{
			Profile: authority.ProfileObserver,
			Grant:   authority.Grant{Principal: p, ConnID: conn},
			Expires: life,
		}, user)
		if err != nil {
			return "", err
		}
		return cred.JWT, nil
	}
	switch {
	case strings.HasPrefix(r.Token, "good-"):
		return mint(m.main, strings.TrimPrefix(r.Token, "good-"), time.Minute, r.UserNkey)
	case strings.HasPrefix(r.Token, "brief-"):
		return mint(m.main, strings.TrimPrefix(r.Token, "brief-"), 2*time.Second, r.UserNkey)
	case r.Token == "other-user":
		return mint(m.main, "mallory", time.Minute, m.mainAuth.SentinelPublicKey())
	case r.Token == "other-account":
		return mint(m.idle, "mallory", time.Minute, r.UserNkey)
	}
	return "", errors.New("unknown bearer")
}

// serve runs the main space's callout service for the test.
func (m *mesh) serve(t *testing.T) {
	t.Helper()
	nc, err := nats.Connect(m.url, nats.UserCredentials(m.callout), nats.Name("auth-callout"))
	if err != nil {
		t.Fatalf("connect the callout user: %v", err)
	}
	t.Cleanup(nc.Close)
	svc, err := callout.Serve(t.Context(), nc, callout.Config{
		Account:     m.mainAuth.Account(),
		XKey:        m.mainAuth.XKey(),
		DataAccount: m.main.AccountPublicKey(),
		Authorize:   m.authorize,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Stop)
}

// client connects with sentinel creds and token, as a user-mode client does: its nonce is the
// connection name and keys its inbox.
func client(t *testing.T, url, sentinel, token string, opts ...nats.Option) (*nats.Conn, error) {
	t.Helper()
	conn := wire.NewConnID()
	opts = append([]nats.Option{
		nats.UserCredentials(sentinel), nats.Name(string(conn)), nats.CustomInboxPrefix(conn.InboxPrefix()),
		nats.NoReconnect(),
	}, opts...)
	if token != "" {
		opts = append(opts, nats.Token(token))
	}
	nc, err := nats.Connect(url, opts...)
	if err == nil {
		t.Cleanup(nc.Close)
	}
	return nc, err
}

// violations records the permission violations the broker sends a connection.
type violations chan error

func recordViolations() (nats.Option, violations) {
	v := make(violations, 16)
	return nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			v <- err
		}
	}), v
}

// expect waits for the broker to refuse op ("Publish" or "Subscription") on subject.
func (v violations) expect(t *testing.T, nc *nats.Conn, op, subject string) {
	t.Helper()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	want := op + " to " + strconv.Quote(subject)
	timeout := time.After(5 * time.Second)
	for {
		select {
		case err := <-v:
			if strings.Contains(err.Error(), want) {
				return
			}
		case <-timeout:
			t.Fatalf("no permissions violation for %s", want)
		}
	}
}

func TestCalloutOnTheBroker(t *testing.T) {
	m := startMesh(t)
	m.serve(t)

	t.Run("the sentinel alone is refused", func(t *testing.T) {
		t.Parallel()
		for _, token := range []string{"", "bad-token", "other-user", "other-account"} {
			start := time.Now()
			if _, err := client(t, m.url, m.sentinel, token); !errors.Is(err, nats.ErrAuthorization) {
				t.Errorf("token %q: connect = %v, want an authorization violation", token, err)
			}
			t.Logf("token %q refused in %s", token, time.Since(start).Round(time.Millisecond))
		}
	})

	t.Run("a good token lands in the data account with the minted permissions", func(t *testing.T) {
		t.Parallel()
		onErr, v := recordViolations()
		nc, err := client(t, m.url, m.sentinel, "good-alice", onErr)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		// Only the data account has JetStream; the auth account has none to answer.
		if _, err := js.AccountInfo(t.Context()); err != nil {
			t.Errorf("JetStream account info from the data account: %v", err)
		}
		chat := "cotal.main.chat." + owner + ".alice.general"
		if err := nc.Publish(chat, []byte("hi")); err != nil {
			t.Fatal(err)
		}
		v.expect(t, nc, "Publish", chat)
		if _, err := nc.SubscribeSync("cotal.idle.>"); err != nil {
			t.Fatal(err)
		}
		v.expect(t, nc, "Subscription", "cotal.idle.>")
	})

	t.Run("the connection drops when its jwt expires", func(t *testing.T) {
		t.Parallel()
		closed := make(chan struct{})
		expired := make(chan struct{}, 1)
		start := time.Now()
		_, err := client(t, m.url, m.sentinel, "brief-bob",
			nats.ClosedHandler(func(*nats.Conn) { close(closed) }),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				if errors.Is(err, nats.ErrAuthExpired) {
					expired <- struct{}{}
				}
			}))
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("the connection outlived its jwt")
		}
		t.Logf("dropped after %s", time.Since(start).Round(time.Millisecond))
		select {
		case <-expired:
		case <-time.After(5 * time.Second):
			t.Error("the broker closed the connection without saying its authentication expired")
		}
	})

	t.Run("the callout user may do nothing else", func(t *testing.T) {
		t.Parallel()
		onErr, v := recordViolations()
		nc, err := nats.Connect(m.url, nats.UserCredentials(m.callout), onErr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		for _, subj := range []string{"foo", meshwire.AuthCalloutSubject, "$SYS._INBOX.x.y"} {
			if err := nc.Publish(subj, nil); err != nil {
				t.Fatal(err)
			}
			v.expect(t, nc, "Publish", subj)
		}
		if _, err := nc.SubscribeSync("foo"); err != nil {
			t.Fatal(err)
		}
		v.expect(t, nc, "Subscription", "foo")
		if _, err := nc.SubscribeSync(meshwire.AuthCalloutSubject); err != nil {
			t.Fatal(err)
		}
		v.expect(t, nc, "Subscription", meshwire.AuthCalloutSubject)
		if _, err := nc.QueueSubscribeSync(meshwire.AuthCalloutSubject, "elsewhere"); err != nil {
			t.Fatal(err)
		}
		v.expect(t, nc, "Subscription", meshwire.AuthCalloutSubject)
	})

	t.Run("with no callout service the sentinel times out", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		// The client waits longer than the broker's auth timeout (2 s), so the refusal is the
		// broker's. The broker's first PING to a client is due at the same moment (2 s to 2.4 s
		// after CONNECT); when it comes first, nats.go gives up on the handshake with that error.
		_, err := client(t, m.url, m.idleSt, "good-alice", nats.Timeout(10*time.Second))
		if !errors.Is(err, nats.ErrAuthorization) && (err == nil || !strings.Contains(err.Error(), "got 'PING'")) {
			t.Errorf("connect = %v, want an authorization violation", err)
		}
		t.Logf("refused after %s", time.Since(start).Round(time.Millisecond))
	})

	t.Run("serve refuses a connection that may not subscribe", func(t *testing.T) {
		t.Parallel()
		p, err := wire.NewPrincipal(owner, "observer")
		if err != nil {
			t.Fatal(err)
		}
		cred, err := m.main.Mint(authority.MintRequest{Profile: authority.ProfileObserver, Grant: authority.Grant{Principal: p}})
		if err != nil {
			t.Fatal(err)
		}
		path := writeCreds(t, func() ([]byte, error) { return cred.Creds, nil })
		nc, err := nats.Connect(m.url, nats.UserCredentials(path), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		svc, err := callout.Serve(t.Context(), nc, callout.Config{
			Account: m.mainAuth.Account(), XKey: m.mainAuth.XKey(), DataAccount: m.main.AccountPublicKey(), Authorize: m.authorize,
		})
		if !errors.Is(err, nats.ErrPermissionViolation) {
			if svc != nil {
				svc.Stop()
			}
			t.Errorf("Serve on a data-account observer = %v, want a permissions violation", err)
		}
	})
}

func TestServeStopsWithItsContext(t *testing.T) {
	m := startMesh(t)
	nc, err := nats.Connect(m.url, nats.UserCredentials(m.callout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithCancel(t.Context())
	svc, err := callout.Serve(ctx, nc, callout.Config{
		Account: m.mainAuth.Account(), XKey: m.mainAuth.XKey(), DataAccount: m.main.AccountPublicKey(), Authorize: m.authorize,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client(t, m.url, m.sentinel, "good-carol"); err != nil {
		t.Fatalf("connect while serving: %v", err)
	}
	cancel()
	svc.Stop() // waits for the watcher's Stop, and is idempotent
	if n, err := nc.NumSubscriptions(), nc.LastError(); n != 0 || err != nil {
		t.Errorf("after the context ended: %d subscriptions, last error %v", n, err)
	}
}
