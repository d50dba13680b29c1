package userauth

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gocotal/cotal/internal/failover"
	"github.com/gocotal/cotal/wire"
)

// AgentCredentials are what a managed agent proves itself with at the exchange.
type AgentCredentials struct {
	Owner      string `json:"owner"`
	Actor      string `json:"actor"`
	ActorToken string `json:"actorToken"`
}

// maxReply bounds an exchange's answer.
const maxReply = 64 << 10

// FetchAgentBearer exchanges a managed agent's actor token for a bearer at the exchange at
// exchangeURL (its public face, or its loopback face with capability cap): the bearer and when
// it expires, at most MaxAgentBearerLifetime away. A refusal is ErrDenied; the exchange says no
// more than that.
func FetchAgentBearer(ctx context.Context, hc *http.Client, exchangeURL, cap string, a AgentCredentials) (string, time.Time, error) {
	body, _ := json.Marshal(a) // strings always encode
	out, err := postExchange(ctx, hc, exchangeURL, cap, body)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("exchange the actor token of %s.%s: %w", a.Owner, a.Actor, err)
	}
	return out.Token, time.Unix(out.Exp, 0), nil
}

// postExchange posts body to the exchange and returns its bearer; a refusal is ErrDenied.
func postExchange(ctx context.Context, hc *http.Client, exchangeURL, cap string, body []byte) (*exchangeReply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(exchangeURL, "/")+PathExchange, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if cap != "" {
		req.Header.Set("Authorization", "Bearer "+cap)
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxReply))
	if err != nil {
		return nil, err
	}
	switch {
	case res.StatusCode == http.StatusUnauthorized:
		return nil, ErrDenied
	case failover.Status(res.StatusCode) != nil:
		return nil, failover.Status(res.StatusCode)
	case res.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("HTTP %d", res.StatusCode)
	}
	var out exchangeReply
	if err := json.Unmarshal(raw, &out); err != nil || out.Token == "" {
		return nil, errors.New("the answer holds no bearer")
	}
	return &out, nil
}

// clientTimeout bounds one request of NewHTTPClient's clients.
const clientTimeout = 30 * time.Second

// NewHTTPClient returns the client the exchange's callers use: every request bounded, and no
// redirect followed, since a request body carries an IdP token or an actor token that must reach
// the exchange and nothing else.
func NewHTTPClient() *http.Client {
	return &http.Client{
		Timeout:       clientTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// PersonBearer is what a person asks the exchange for: a bearer of their actor, of a view
// (none: their row's own grant), and for view manager-caller the instance it addresses (none:
// the exchange picks the only live one).
type PersonBearer struct {
	Actor             string            `json:"actor"`
	View              View              `json:"view,omitempty"`
	ManagerInstanceID wire.LifecycleUID `json:"managerInstanceId,omitempty"`
}

// FetchPersonBearer exchanges a person's IdP token for the bearer req describes at the exchange at
// exchangeURL: the bearer, and its actor claim, read (not verified: the callout verifies it) for
// the owner the exchange derived, the incarnation and the manager instance it names. A refusal is
// ErrDenied.
func FetchPersonBearer(ctx context.Context, hc *http.Client, exchangeURL, idToken string, req PersonBearer) (string, *Act, error) {
	return FetchViewBearer(ctx, hc, exchangeURL, "", idToken, req)
}

// FetchViewBearer is FetchPersonBearer at a face that needs a capability, capability (the
// loopback face, the only one that issues the views of the host's own tools); "" sends none.
func FetchViewBearer(ctx context.Context, hc *http.Client, exchangeURL, capability, idToken string, req PersonBearer) (string, *Act, error) {
	body, _ := json.Marshal(struct { // strings always encode
		IdpToken string `json:"idpToken"`
		PersonBearer
	}{idToken, req})
	out, err := postExchange(ctx, hc, exchangeURL, capability, body)
	if err != nil {
		return "", nil, fmt.Errorf("exchange the login for a bearer of %s: %w", req.Actor, err)
	}
	act, err := peekAct(out.Token)
	if err != nil {
		return "", nil, err
	}
	return out.Token, act, nil
}

// peekAct reads a bearer's act claim without verifying it.
func peekAct(token string) (*Act, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, errors.New("the exchange's bearer is not a JWT")
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, fmt.Errorf("the exchange's bearer: %w", err)
	}
	var c Claims
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("the exchange's bearer: %w", err)
	}
	return &c.Act, nil
}
