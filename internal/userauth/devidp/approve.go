package devidp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// approveTimeout bounds an Approve call whose ctx has no deadline.
const approveTimeout = 30 * time.Second

// Error codes of the approval door, and the sentinels they stand for.
const (
	codeBadRequest      = "invalid_request"
	codeBadUser         = "invalid_user"
	codeUnknownUserCode = "unknown_user_code"
)

// approveError writes the door's error answer.
func approveError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

// approveRequest is the body of POST /device/approve.
type approveRequest struct {
	UserCode string `json:"userCode"`
	User     string `json:"user"`
}

// handleApprove is the scripted approval door. It takes JSON only and refuses any request from a
// browser page (one with an Origin header), so that it cannot be driven cross-site.
func (s *Server) handleApprove(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Origin") != "" {
		approveError(w, http.StatusForbidden, codeBadRequest, "browser requests are refused")
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		approveError(w, http.StatusUnsupportedMediaType, codeBadRequest, "content type must be application/json")
		return
	}
	var req approveRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		approveError(w, http.StatusBadRequest, codeBadRequest, "body is not an approval object")
		return
	}
	if req.User == "" {
		approveError(w, http.StatusBadRequest, codeBadUser, ErrBadUser.Error())
		return
	}
	switch err := s.decide(req.UserCode, req.User); {
	case errors.Is(err, ErrBadUser):
		approveError(w, http.StatusBadRequest, codeBadUser, err.Error())
		return
	case err != nil:
		approveError(w, http.StatusBadRequest, codeUnknownUserCode, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

// Approve approves the device login with userCode as user at the dev provider at baseURL, which
// must be http or https on a loopback host. hc nil means a default client; a ctx without deadline
// gets 30 s. It fails with [ErrBadUser] for a bad user name (checked before sending) and with an
// error carrying the server's reason when the server refuses.
func Approve(ctx context.Context, hc *http.Client, baseURL, userCode, user string) error {
	if err := ValidUser(user); err != nil {
		return fmt.Errorf("approve device login: %w", err)
	}
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !isLoopbackHost(u.Hostname()) {
		return fmt.Errorf("approve device login: base url %q is not a loopback http(s) url", baseURL)
	}
	// The approval body must reach the dev provider itself: no redirect is followed.
	var c http.Client
	if hc != nil {
		c = *hc
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return errors.New("redirect refused") }
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, approveTimeout)
		defer cancel()
	}
	body, err := json.Marshal(approveRequest{UserCode: userCode, User: user})
	if err != nil {
		return fmt.Errorf("approve device login: %w", err)
	}
	endpoint := strings.TrimSuffix(baseURL, "/") + "/device/approve"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("approve device login: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("approve device login: %w", err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("approve device login: read response: %w", err)
	}
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	var e struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if json.Unmarshal(rb, &e) != nil || e.Error == "" {
		return fmt.Errorf("approve device login: status %d", resp.StatusCode)
	}
	switch e.Error {
	case codeUnknownUserCode:
		return fmt.Errorf("approve device login: %w", ErrUnknownUserCode)
	case codeBadUser:
		return fmt.Errorf("approve device login: %w", ErrBadUser)
	}
	return fmt.Errorf("approve device login: status %d: %s: %q", resp.StatusCode, e.Error, e.Description)
}
