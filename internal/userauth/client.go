package userauth

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
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
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(exchangeURL, "/")+PathExchange, bytes.NewReader(body))
	if err != nil {
		return "", time.Time{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if cap != "" {
		req.Header.Set("Authorization", "Bearer "+cap)
	}
	res, err := hc.Do(req)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("exchange the actor token of %s.%s: %w", a.Owner, a.Actor, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxReply))
	if err != nil {
		return "", time.Time{}, err
	}
	switch {
	case res.StatusCode == http.StatusUnauthorized:
		return "", time.Time{}, fmt.Errorf("exchange the actor token of %s.%s: %w", a.Owner, a.Actor, ErrDenied)
	case res.StatusCode != http.StatusOK:
		return "", time.Time{}, fmt.Errorf("exchange the actor token of %s.%s: HTTP %d", a.Owner, a.Actor, res.StatusCode)
	}
	var out exchangeReply
	if err := json.Unmarshal(raw, &out); err != nil || out.Token == "" {
		return "", time.Time{}, fmt.Errorf("exchange the actor token of %s.%s: the answer holds no bearer", a.Owner, a.Actor)
	}
	return out.Token, time.Unix(out.Exp, 0), nil
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
