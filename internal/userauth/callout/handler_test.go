package callout

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// The handler on requests built the way nats-server builds them, and on forgeries of them: what
// is answered, what is refused with a sealed error, and what is dropped without a word.

const goodToken = "good-secret-bearer-7f3a"

// fixture is an auth account with its curve key, a data account with a signing key, and a server
// with its own signing and curve keys.
type fixture struct {
	t                     *testing.T
	account, xkey         nkeys.KeyPair
	accountPub, xkeyPub   string
	data, dataSigning     nkeys.KeyPair
	dataPub               string
	server, serverX       nkeys.KeyPair
	serverPub, serverXPub string
	log                   bytes.Buffer
	h                     *handler
	authorize             func(context.Context, Request) (string, error)
	lastRequest           Request
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t}
	f.account, f.accountPub = key(t, nkeys.PrefixByteAccount)
	f.xkey, f.xkeyPub = key(t, nkeys.PrefixByteCurve)
	f.data, f.dataPub = key(t, nkeys.PrefixByteAccount)
	f.dataSigning, _ = key(t, nkeys.PrefixByteAccount)
	f.server, f.serverPub = key(t, nkeys.PrefixByteServer)
	f.serverX, f.serverXPub = key(t, nkeys.PrefixByteCurve)
	f.authorize = func(_ context.Context, r Request) (string, error) {
		if r.Token != goodToken {
			return "", errors.New("unknown bearer")
		}
		return f.userJWT(r.UserNkey, f.dataSigning, f.dataPub), nil
	}
	cfg := Config{
		Account: f.account, XKey: f.xkey, DataAccount: f.dataPub,
		Authorize: func(ctx context.Context, r Request) (string, error) {
			f.lastRequest = r
			return f.authorize(ctx, r)
		},
		Log: slog.New(slog.NewJSONHandler(&f.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	acct, err := cfg.validate()
	if err != nil {
		t.Fatal(err)
	}
	f.h = &handler{cfg: cfg, accountPub: acct, log: cfg.Log}
	return f
}

func key(t *testing.T, kind nkeys.PrefixByte) (nkeys.KeyPair, string) {
	t.Helper()
	kp, err := nkeys.CreatePair(kind)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return kp, pub
}

// userJWT signs a user JWT for user with signer, landing it in issuerAccount.
func (f *fixture) userJWT(user string, signer nkeys.KeyPair, issuerAccount string) string {
	f.t.Helper()
	uc := jwt.NewUserClaims(user)
	uc.IssuerAccount = issuerAccount
	uc.Expires = time.Now().Add(time.Minute).Unix()
	tok, err := uc.Encode(signer)
	if err != nil {
		f.t.Fatal(err)
	}
	return tok
}

// request returns the claims of a request as the server makes them, for a fresh user key.
func (f *fixture) request() *jwt.AuthorizationRequestClaims {
	_, user := key(f.t, nkeys.PrefixByteUser)
	rc := jwt.NewAuthorizationRequestClaims(f.accountPub)
	rc.Audience = requestAudience
	rc.UserNkey = user
	rc.Server = jwt.ServerID{Name: "s1", Host: "127.0.0.1", ID: f.serverPub, XKey: f.serverXPub}
	rc.ClientInformation = jwt.ClientInformation{Host: "127.0.0.1", Name: "nonce-0123456789", Kind: "Client", Type: "nats"}
	rc.ConnectOptions = jwt.ConnectOptions{Token: goodToken, Name: "nonce-0123456789", Protocol: 1}
	rc.Expires = time.Now().Add(2 * time.Second).Unix()
	return rc
}

// sign encodes rc as the server does.
func (f *fixture) sign(rc *jwt.AuthorizationRequestClaims) string {
	f.t.Helper()
	tok, err := rc.Encode(f.server)
	if err != nil {
		f.t.Fatal(err)
	}
	return tok
}

// seal seals tok from the server's curve key to to, with the header naming the server's key.
func (f *fixture) seal(tok, to string) (nats.Header, []byte) {
	f.t.Helper()
	sealed, err := f.serverX.Seal([]byte(tok), to)
	if err != nil {
		f.t.Fatal(err)
	}
	return nats.Header{xkeyHeader: []string{f.serverXPub}}, sealed
}

// response opens and decodes a reply as the server does.
func (f *fixture) response(reply []byte) *jwt.AuthorizationResponseClaims {
	f.t.Helper()
	plain, err := f.serverX.Open(reply, f.xkeyPub)
	if err != nil {
		f.t.Fatalf("the server cannot open the reply: %v", err)
	}
	rc, err := jwt.DecodeAuthorizationResponseClaims(string(plain))
	if err != nil {
		f.t.Fatal(err)
	}
	vr := jwt.CreateValidationResults()
	rc.Validate(vr)
	if vr.IsBlocking(true) {
		f.t.Fatalf("response does not validate: %v", vr.Errors())
	}
	return rc
}

// rawSign encodes claims signed by kp, whatever kind of key it is: what a forger would send.
func rawSign(t *testing.T, claims *jwt.AuthorizationRequestClaims, kp nkeys.KeyPair) string {
	t.Helper()
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	claims.Issuer = pub
	claims.Type = jwt.AuthorizationRequestClaim
	claims.AuthorizationRequest.Version = 2 // the current claim version, so decoding checks the issuer's kind
	hdr, err := json.Marshal(jwt.Header{Type: jwt.TokenTypeJwt, Algorithm: jwt.AlgorithmNkey})
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding
	toSign := enc.EncodeToString(hdr) + "." + enc.EncodeToString(body)
	sig, err := kp.Sign([]byte(toSign))
	if err != nil {
		t.Fatal(err)
	}
	return toSign + "." + enc.EncodeToString(sig)
}

func TestHandleAnswersAGoodRequest(t *testing.T) {
	f := newFixture(t)
	rc := f.request()
	hdr, data := f.seal(f.sign(rc), f.xkeyPub)
	reply := f.h.handle(t.Context(), hdr, data)
	if reply == nil {
		t.Fatalf("a good request was dropped; log: %s", f.log.String())
	}
	if bytes.HasPrefix(reply, []byte("eyJ")) {
		t.Error("the reply is not sealed")
	}
	resp := f.response(reply)
	if resp.Subject != rc.UserNkey || resp.Audience != f.serverPub || resp.Issuer != f.accountPub || resp.Error != "" {
		t.Errorf("response sub %s aud %s iss %s error %q; want the user, the server, the auth account and no error",
			resp.Subject, resp.Audience, resp.Issuer, resp.Error)
	}
	uc, err := jwt.DecodeUserClaims(resp.Jwt)
	if err != nil || uc.Subject != rc.UserNkey || uc.IssuerAccount != f.dataPub {
		t.Errorf("user jwt %+v, %v", uc, err)
	}
	want := Request{UserNkey: rc.UserNkey, Token: goodToken, ConnName: "nonce-0123456789", ServerID: f.serverPub, ServerName: "s1", ClientHost: "127.0.0.1"}
	if f.lastRequest != want {
		t.Errorf("authorize saw %+v, want %+v", f.lastRequest, want)
	}
	if strings.Contains(f.log.String(), goodToken) {
		t.Errorf("the token reached the log: %s", f.log.String())
	}
}

func TestHandleDropsForgeries(t *testing.T) {
	tests := []struct {
		name string
		// reason is what the log says about the drop.
		reason string
		// build returns the message the handler gets.
		build func(f *fixture) (nats.Header, []byte)
		// allow, when set, is the server allow-list.
		allow func(f *fixture) []string
	}{
		{"unsealed", "not sealed", func(f *fixture) (nats.Header, []byte) {
			return nats.Header{}, []byte(f.sign(f.request()))
		}, nil},
		{"plain jwt under a sealing header", "wrong version", func(f *fixture) (nats.Header, []byte) {
			return nats.Header{xkeyHeader: []string{f.serverXPub}}, []byte(f.sign(f.request()))
		}, nil},
		{"sealing header is not a curve key", "not a public curve key", func(f *fixture) (nats.Header, []byte) {
			_, data := f.seal(f.sign(f.request()), f.xkeyPub)
			return nats.Header{xkeyHeader: []string{f.serverPub}}, data
		}, nil},
		{"sealed to another curve key", "could not decrypt", func(f *fixture) (nats.Header, []byte) {
			_, other := key(f.t, nkeys.PrefixByteCurve)
			return f.seal(f.sign(f.request()), other)
		}, nil},
		{"header names another sender key", "could not decrypt", func(f *fixture) (nats.Header, []byte) {
			_, data := f.seal(f.sign(f.request()), f.xkeyPub)
			_, other := key(f.t, nkeys.PrefixByteCurve)
			return nats.Header{xkeyHeader: []string{other}}, data
		}, nil},
		{"server_id.xkey is not the sealing key", "names curve key", func(f *fixture) (nats.Header, []byte) {
			rc := f.request()
			_, rc.Server.XKey = key(f.t, nkeys.PrefixByteCurve)
			return f.seal(f.sign(rc), f.xkeyPub)
		}, nil},
		{"server_id.id is not the signer", "names server", func(f *fixture) (nats.Header, []byte) {
			rc := f.request()
			_, rc.Server.ID = key(f.t, nkeys.PrefixByteServer)
			return f.seal(f.sign(rc), f.xkeyPub)
		}, nil},
		{"signed by an account key", "expected prefixes", func(f *fixture) (nats.Header, []byte) {
			rc := f.request()
			forger, pub := key(f.t, nkeys.PrefixByteAccount)
			rc.Server.ID = pub
			return f.seal(rawSign(f.t, rc, forger), f.xkeyPub)
		}, nil},
		{"signature by another key under the server's name", "signature verification", func(f *fixture) (nats.Header, []byte) {
			forger, _ := key(f.t, nkeys.PrefixByteServer)
			pubOnly, err := nkeys.FromPublicKey(f.serverPub)
			if err != nil {
				f.t.Fatal(err)
			}
			tok, err := f.request().EncodeWithSigner(pubOnly, func(_ string, data []byte) ([]byte, error) { return forger.Sign(data) })
			if err != nil {
				f.t.Fatal(err)
			}
			return f.seal(tok, f.xkeyPub)
		}, nil},
		{"for another auth account", "not this auth account", func(f *fixture) (nats.Header, []byte) {
			rc := f.request()
			_, rc.Subject = key(f.t, nkeys.PrefixByteAccount)
			return f.seal(f.sign(rc), f.xkeyPub)
		}, nil},
		{"wrong audience", "has audience", func(f *fixture) (nats.Header, []byte) {
			rc := f.request()
			rc.Audience = "somewhere-else"
			return f.seal(f.sign(rc), f.xkeyPub)
		}, nil},
		{"expired", "claim is expired", func(f *fixture) (nats.Header, []byte) {
			rc := f.request()
			rc.Expires = time.Now().Add(-time.Minute).Unix()
			return f.seal(f.sign(rc), f.xkeyPub)
		}, nil},
		{"server not on the allow-list", "allow-list", func(f *fixture) (nats.Header, []byte) {
			return f.seal(f.sign(f.request()), f.xkeyPub)
		}, func(f *fixture) []string {
			_, other := key(f.t, nkeys.PrefixByteServer)
			return []string{other}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			if tt.allow != nil {
				f.h.cfg.AllowedServers = tt.allow(f)
			}
			called := false
			f.authorize = func(context.Context, Request) (string, error) {
				called = true
				return "", errors.New("must not be asked")
			}
			hdr, data := tt.build(f)
			if reply := f.h.handle(t.Context(), hdr, data); reply != nil {
				t.Errorf("a forged request was answered (%d bytes)", len(reply))
			}
			if called {
				t.Error("authorize was asked about a forged request")
			}
			if log := f.log.String(); !strings.Contains(log, "auth callout request dropped") || !strings.Contains(log, tt.reason) {
				t.Errorf("the drop was not logged with the reason %q: %s", tt.reason, log)
			}
			if strings.Contains(f.log.String(), goodToken) {
				t.Errorf("the token reached the log: %s", f.log.String())
			}
		})
	}
}

func TestHandleAllowListAdmitsListedServer(t *testing.T) {
	f := newFixture(t)
	_, other := key(t, nkeys.PrefixByteServer)
	f.h.cfg.AllowedServers = []string{other, f.serverPub}
	hdr, data := f.seal(f.sign(f.request()), f.xkeyPub)
	if reply := f.h.handle(t.Context(), hdr, data); reply == nil || f.response(reply).Error != "" {
		t.Fatalf("a listed server was not answered; log: %s", f.log.String())
	}
}

func TestHandleRefusesWithSealedError(t *testing.T) {
	tests := []struct {
		name      string
		authorize func(f *fixture, r Request) (string, error)
		// logged is what the log must say about the refusal.
		logged string
	}{
		{"authorize refuses", func(*fixture, Request) (string, error) {
			return "", errors.New("bearer expired")
		}, "bearer expired"},
		{"jwt for another user key", func(f *fixture, _ Request) (string, error) {
			_, other := key(f.t, nkeys.PrefixByteUser)
			return f.userJWT(other, f.dataSigning, f.dataPub), nil
		}, "not to the connection's key"},
		{"jwt for another account", func(f *fixture, r Request) (string, error) {
			other, otherPub := key(f.t, nkeys.PrefixByteAccount)
			return f.userJWT(r.UserNkey, other, otherPub), nil
		}, "not the data account"},
		{"jwt signed by the auth account itself", func(f *fixture, r Request) (string, error) {
			return f.userJWT(r.UserNkey, f.account, ""), nil
		}, "not the data account"},
		{"expired jwt", func(f *fixture, r Request) (string, error) {
			uc := jwt.NewUserClaims(r.UserNkey)
			uc.IssuerAccount = f.dataPub
			uc.Expires = time.Now().Add(-time.Minute).Unix()
			return uc.Encode(f.dataSigning)
		}, "expired"},
		{"not a jwt", func(*fixture, Request) (string, error) {
			return "garbage", nil
		}, "decode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.authorize = func(_ context.Context, r Request) (string, error) { return tt.authorize(f, r) }
			rc := f.request()
			hdr, data := f.seal(f.sign(rc), f.xkeyPub)
			reply := f.h.handle(t.Context(), hdr, data)
			if reply == nil {
				t.Fatalf("a refusal was dropped instead of answered; log: %s", f.log.String())
			}
			resp := f.response(reply)
			if resp.Error != refusal || resp.Jwt != "" || resp.Subject != rc.UserNkey || resp.Audience != f.serverPub {
				t.Errorf("refusal %+v, want the generic %q for the user and server", resp.AuthorizationResponse, refusal)
			}
			log := f.log.String()
			if !strings.Contains(log, tt.logged) || !strings.Contains(log, f.serverPub) || !strings.Contains(log, "nonce-0123456789") {
				t.Errorf("the log does not give the reason %q with the server and conn: %s", tt.logged, log)
			}
			if strings.Contains(log, goodToken) {
				t.Errorf("the token reached the log: %s", log)
			}
		})
	}
}

func TestHandleBoundsAuthorizeByTheRequestExpiry(t *testing.T) {
	f := newFixture(t)
	var deadline time.Time
	f.authorize = func(ctx context.Context, _ Request) (string, error) {
		deadline, _ = ctx.Deadline()
		return "", errors.New("no")
	}
	rc := f.request()
	hdr, data := f.seal(f.sign(rc), f.xkeyPub)
	f.h.handle(t.Context(), hdr, data)
	if !deadline.Equal(time.Unix(rc.Expires, 0)) {
		t.Errorf("authorize deadline %v, want the request's expiry %v", deadline, time.Unix(rc.Expires, 0))
	}
}

func TestConfigValidate(t *testing.T) {
	account, _ := key(t, nkeys.PrefixByteAccount)
	xkey, _ := key(t, nkeys.PrefixByteCurve)
	user, _ := key(t, nkeys.PrefixByteUser)
	_, data := key(t, nkeys.PrefixByteAccount)
	_, server := key(t, nkeys.PrefixByteServer)
	authorize := func(context.Context, Request) (string, error) { return "", nil }
	good := Config{Account: account, XKey: xkey, DataAccount: data, AllowedServers: []string{server}, Authorize: authorize}
	accountPub, _ := account.PublicKey()
	tests := []struct {
		name   string
		mutate func(c *Config)
	}{
		{"no account", func(c *Config) { c.Account = nil }},
		{"no xkey", func(c *Config) { c.XKey = nil }},
		{"no authorize", func(c *Config) { c.Authorize = nil }},
		{"user key as account", func(c *Config) { c.Account = user }},
		{"account key as xkey", func(c *Config) { c.XKey = account }},
		{"data account not an account key", func(c *Config) { c.DataAccount = server }},
		{"data account is the auth account", func(c *Config) { c.DataAccount = accountPub }},
		{"allowed server not a server key", func(c *Config) { c.AllowedServers = []string{data} }},
	}
	if _, err := good.validate(); err != nil {
		t.Fatalf("a good config was refused: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.mutate(&c)
			if _, err := c.validate(); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("validate = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestRequestNeverPrintsTheToken(t *testing.T) {
	r := Request{UserNkey: "UABC", Token: goodToken, ConnName: "nonce-0123456789"}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "request", r)
	for _, s := range []string{r.String(), buf.String()} {
		if strings.Contains(s, goodToken) || !strings.Contains(s, "nonce-0123456789") {
			t.Errorf("rendered request %q leaks the token or omits the conn", s)
		}
	}
}
