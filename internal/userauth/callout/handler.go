package callout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// What nats-server puts on the wire: these are the server's protocol, not Cotal's contract.
const (
	// xkeyHeader carries the public curve key of the server that sealed a request.
	xkeyHeader = "Nats-Server-Xkey"
	// requestAudience is the audience of every authorization request the server signs.
	requestAudience = "nats-authorization-request"
)

// refusal is the only reason a refused client is told. The real one goes to the log: a client
// probing bearers learns nothing from the answer.
const refusal = "not authorized"

// Request is what the decision function sees of one connect.
type Request struct {
	// UserNkey is the public user key the server generated for the connection; the user JWT
	// must be issued to it.
	UserNkey string
	// Token is the client's auth_token: its bearer. It is secret and never logged.
	Token string
	// ConnName is the connection name the client chose: its nonce in user mode.
	ConnName string
	// ServerID and ServerName name the server that asked.
	ServerID   string
	ServerName string
	// ClientHost is the client's address as the server saw it.
	ClientHost string
}

// LogValue implements slog.LogValuer, leaving the token out.
func (r Request) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("user", r.UserNkey),
		slog.String("conn", r.ConnName),
		slog.String("server", r.ServerID),
		slog.String("serverName", r.ServerName),
		slog.String("host", r.ClientHost),
	)
}

// String implements fmt.Stringer, leaving the token out.
func (r Request) String() string {
	return fmt.Sprintf("callout request for %s (conn %q from %s via server %s)", r.UserNkey, r.ConnName, r.ClientHost, r.ServerID)
}

// handler decides requests. It holds no state beyond its configuration, so it is safe for
// concurrent use.
type handler struct {
	cfg        Config
	accountPub string
	log        *slog.Logger
}

// handle turns one sealed authorization request into the sealed response to send, or nil when the
// request is dropped without a reply. ctx bounds the decision; the request's own expiry bounds it
// further, since the server stops waiting then.
func (h *handler) handle(ctx context.Context, hdr nats.Header, data []byte) []byte {
	rc, serverXKey, err := h.open(hdr, data)
	if err != nil {
		h.log.Warn("auth callout request dropped", "reason", err.Error())
		return nil
	}
	req := Request{
		UserNkey:   rc.UserNkey,
		Token:      rc.ConnectOptions.Token,
		ConnName:   rc.ConnectOptions.Name,
		ServerID:   rc.Server.ID,
		ServerName: rc.Server.Name,
		ClientHost: rc.ClientInformation.Host,
	}
	if rc.Expires > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, time.Unix(rc.Expires, 0))
		defer cancel()
	}
	userJWT, err := h.cfg.Authorize(ctx, req)
	if err != nil {
		h.log.Info("auth callout refused a connect", "request", req, "reason", err.Error())
	} else if err = h.checkUser(req, userJWT); err != nil {
		// Authorize said yes but minted something the broker must not get: a bug, not a refusal.
		err = fmt.Errorf("authorize returned an unusable user jwt: %w", err)
		h.log.Error("auth callout refused a connect", "request", req, "reason", err.Error())
	}
	reply, rerr := h.respond(req, userJWT, err, serverXKey)
	if rerr != nil {
		h.log.Error("auth callout response not sent", "request", req, "err", rerr.Error())
		return nil
	}
	if err == nil {
		h.log.Debug("auth callout authorized a connect", "request", req)
	}
	return reply
}

// open unseals and verifies a request: it must be sealed by a server to our curve key, signed by
// that same server, addressed to the auth account, unexpired, and from an allowed server. It
// returns the request claims and the server's curve key, or why the request is dropped.
func (h *handler) open(hdr nats.Header, data []byte) (*jwt.AuthorizationRequestClaims, string, error) {
	serverXKey := hdr.Get(xkeyHeader)
	if serverXKey == "" {
		return nil, "", errors.New("request is not sealed (no " + xkeyHeader + " header)")
	}
	if !nkeys.IsValidPublicCurveKey(serverXKey) {
		return nil, "", fmt.Errorf("sealing key %q is not a public curve key", serverXKey)
	}
	plain, err := h.cfg.XKey.Open(data, serverXKey)
	if err != nil {
		return nil, "", fmt.Errorf("unseal request from %s: %w", serverXKey, err)
	}
	// Decoding verifies the signature against the issuer and refuses an issuer that is not a
	// server key.
	rc, err := jwt.DecodeAuthorizationRequestClaims(string(plain))
	if err != nil {
		return nil, "", fmt.Errorf("decode request: %w", err)
	}
	vr := jwt.CreateValidationResults()
	rc.Validate(vr)
	if vr.IsBlocking(true) {
		return nil, "", fmt.Errorf("invalid request from %s: %s", rc.Issuer, issues(vr))
	}
	switch {
	case !nkeys.IsValidPublicServerKey(rc.Issuer):
		return nil, "", fmt.Errorf("request issuer %q is not a server key", rc.Issuer)
	case rc.Server.ID != rc.Issuer:
		return nil, "", fmt.Errorf("request signed by %s names server %q", rc.Issuer, rc.Server.ID)
	case rc.Server.XKey != serverXKey:
		return nil, "", fmt.Errorf("request from %s was sealed with %s but names curve key %q", rc.Issuer, serverXKey, rc.Server.XKey)
	case rc.Audience != requestAudience:
		return nil, "", fmt.Errorf("request from %s has audience %q, want %q", rc.Issuer, rc.Audience, requestAudience)
	case rc.Subject != h.accountPub:
		return nil, "", fmt.Errorf("request from %s is for account %s, not this auth account %s", rc.Issuer, rc.Subject, h.accountPub)
	case len(h.cfg.AllowedServers) > 0 && !slices.Contains(h.cfg.AllowedServers, rc.Issuer):
		return nil, "", fmt.Errorf("server %s (%q) is not on the allow-list", rc.Issuer, rc.Server.Name)
	}
	return rc, serverXKey, nil
}

// checkUser refuses a user JWT the broker would refuse or that would land the connection anywhere
// but the data account.
func (h *handler) checkUser(req Request, userJWT string) error {
	uc, err := jwt.DecodeUserClaims(userJWT)
	if err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if uc.Subject != req.UserNkey {
		return fmt.Errorf("issued to %s, not to the connection's key %s", uc.Subject, req.UserNkey)
	}
	// The account a user lands in is its issuer account, or its issuer when the account key
	// signed it directly; the broker places it the same way.
	account := uc.IssuerAccount
	if account == "" {
		account = uc.Issuer
	}
	if account != h.cfg.DataAccount {
		return fmt.Errorf("lands in account %s, not the data account %s", account, h.cfg.DataAccount)
	}
	vr := jwt.CreateValidationResults()
	uc.Validate(vr)
	if vr.IsBlocking(true) {
		return fmt.Errorf("invalid: %s", issues(vr))
	}
	return nil
}

// respond builds the signed response, carrying userJWT or, when refused is set, the generic
// refusal, and seals it to the server's curve key.
func (h *handler) respond(req Request, userJWT string, refused error, serverXKey string) ([]byte, error) {
	rc := jwt.NewAuthorizationResponseClaims(req.UserNkey)
	rc.Audience = req.ServerID
	if refused != nil {
		rc.Error = refusal
	} else {
		rc.Jwt = userJWT
	}
	tok, err := rc.Encode(h.cfg.Account)
	if err != nil {
		return nil, fmt.Errorf("encode response: %w", err)
	}
	sealed, err := h.cfg.XKey.Seal([]byte(tok), serverXKey)
	if err != nil {
		return nil, fmt.Errorf("seal response to %s: %w", serverXKey, err)
	}
	return sealed, nil
}

// issues lists the blocking issues of a validation.
func issues(vr *jwt.ValidationResults) string {
	var out []string
	for _, i := range vr.Issues {
		if i.Blocking || i.TimeCheck {
			out = append(out, i.Description)
		}
	}
	return strings.Join(out, "; ")
}
