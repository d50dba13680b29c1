package oidc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

const (
	// maxBody caps every response body read from a provider.
	maxBody = 1 << 20
	// defaultTimeout bounds each request to a provider unless TimeoutEnv says otherwise.
	defaultTimeout = 30 * time.Second
	// TimeoutEnv names the environment variable that overrides the per-request timeout, in
	// milliseconds.
	TimeoutEnv = "COTAL_IDP_TIMEOUT_MS"
)

// CheckURL returns nil if raw is an absolute https URL, or an http URL whose host is loopback
// (127.0.0.0/8, ::1 or localhost). It returns an error matching [ErrInsecureURL] otherwise, and a
// plain error for a URL that does not parse or carries user info or a fragment.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("parse url: %w", err)
	}
	if u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("url %q has no host", raw)
	}
	if u.User != nil {
		return fmt.Errorf("url %q carries user info", raw)
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return fmt.Errorf("url %q carries a fragment", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopbackHost(u.Hostname()) {
			return nil
		}
	}
	return fmt.Errorf("%w: %q", ErrInsecureURL, raw)
}

// isLoopbackHost reports whether host (without port or brackets) names the loopback interface.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// requestTimeout returns the per-request timeout: TimeoutEnv if set, else the default.
func requestTimeout() (time.Duration, error) {
	v := os.Getenv(TimeoutEnv)
	if v == "" {
		return defaultTimeout, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms <= 0 || ms > int64(time.Hour/time.Millisecond) {
		return 0, fmt.Errorf("%s=%q: want a whole number of milliseconds between 1 and 3600000", TimeoutEnv, v)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// noRedirect returns a copy of hc, or of a zero http.Client when hc is nil, that refuses every
// redirect: a provider's endpoints are pinned by its metadata, and following a redirect would
// leave them.
func noRedirect(hc *http.Client) *http.Client {
	var c http.Client
	if hc != nil {
		c = *hc
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return ErrRedirect }
	return &c
}

// send performs req with the per-request timeout and returns the status and the body, read up to
// maxBody. The URL is checked against CheckURL first. A 3xx answer is an error matching
// ErrRedirect.
func send(ctx context.Context, hc *http.Client, method, rawURL string, body url.Values) (int, []byte, error) {
	if err := CheckURL(rawURL); err != nil {
		return 0, nil, err
	}
	d, err := requestTimeout()
	if err != nil {
		return 0, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(body.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, rawURL, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, rawURL, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := noRedirect(hc).Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, rawURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return resp.StatusCode, nil, fmt.Errorf("%s %s: status %d: %w", method, rawURL, resp.StatusCode, ErrRedirect)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s %s: read body: %w", method, rawURL, err)
	}
	if len(b) > maxBody {
		return resp.StatusCode, nil, fmt.Errorf("%s %s: %w", method, rawURL, ErrResponseTooLarge)
	}
	return resp.StatusCode, b, nil
}

// isTimeout reports whether err is a network timeout that the caller's own context did not cause.
func isTimeout(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
