package devidp

import (
	"crypto/rand"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// userCodeAlphabet has no vowels (no words) and no look-alike digits (RFC 8628 §6.1).
const userCodeAlphabet = "BCDFGHJKLMNPQRSTVWXZ"

// userNameRE is the grammar of a user name: it becomes the ID token's sub.
var userNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// Errors the approval paths return; their text is shown to the person or script.
var (
	// ErrBadUser is returned for a user name that does not match ^[a-z][a-z0-9_-]{0,31}$.
	ErrBadUser = errors.New("user name must match ^[a-z][a-z0-9_-]{0,31}$")
	// ErrUnknownUserCode is returned for a user code that is malformed, unknown, expired or
	// already decided.
	ErrUnknownUserCode = errors.New("unknown, expired or already used user code")
)

// deviceGrant is one device login.
type deviceGrant struct {
	userCode string // normalised, without the dash
	scope    []string
	expires  time.Time
	interval time.Duration // grows by 5 s on each slow_down (RFC 8628 §3.5)
	lastPoll time.Time
	user     string // set when approved
	denied   bool
}

// refreshGrant is one refresh token.
type refreshGrant struct {
	user    string
	scope   []string
	expires time.Time
}

// newUserCode returns eight random letters of userCodeAlphabet.
func newUserCode() (string, error) {
	const n = len(userCodeAlphabet)
	limit := byte(256 - 256%n) // reject bytes at or above it so every letter is equally likely
	out := make([]byte, 0, 8)
	buf := make([]byte, 16)
	for len(out) < 8 {
		if _, err := rand.Read(buf); err != nil {
			return "", err
		}
		for _, b := range buf {
			if b < limit && len(out) < 8 {
				out = append(out, userCodeAlphabet[int(b)%n])
			}
		}
	}
	return string(out), nil
}

// formatUserCode shows a normalised code as ABCD-EFGH.
func formatUserCode(c string) string { return c[:4] + "-" + c[4:] }

// normaliseUserCode accepts a code as a person types it: any case, with or without the dash or
// spaces. It returns the eight letters, or false if they cannot be a user code.
func normaliseUserCode(in string) (string, bool) {
	c := strings.ToUpper(strings.NewReplacer("-", "", " ", "").Replace(strings.TrimSpace(in)))
	if len(c) != 8 {
		return "", false
	}
	for _, r := range c {
		if !strings.ContainsRune(userCodeAlphabet, r) {
			return "", false
		}
	}
	return c, true
}

// ValidUser refuses a user name the development IdP does not take, with ErrBadUser.
func ValidUser(user string) error {
	if !userNameRE.MatchString(user) {
		return fmt.Errorf("user %q: %w", user, ErrBadUser)
	}
	return nil
}

// newDevice records a device grant and returns its device code and user code. The caller holds
// no lock.
func (s *Server) newDevice(scope []string) (deviceCode, userCode string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.sweepLocked(now)
	if len(s.devices) >= maxPending {
		return "", "", errors.New("too many pending device logins")
	}
	for range 5 {
		uc, err := newUserCode()
		if err != nil {
			return "", "", err
		}
		if _, taken := s.codes[uc]; taken {
			continue
		}
		dc := rand.Text()
		s.devices[dc] = &deviceGrant{userCode: uc, scope: scope, expires: now.Add(deviceCodeLifetime), interval: s.interval}
		s.codes[uc] = dc
		return dc, uc, nil
	}
	return "", "", errors.New("could not draw a free user code")
}

// decide approves (user != "") or denies (user == "") the device login with userCode.
func (s *Server) decide(userCode, user string) error {
	uc, ok := normaliseUserCode(userCode)
	if !ok {
		return ErrUnknownUserCode
	}
	if user != "" {
		if err := ValidUser(user); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	g := s.devices[s.codes[uc]]
	if g == nil || g.user != "" || g.denied || !now.Before(g.expires) {
		return ErrUnknownUserCode
	}
	if user == "" {
		g.denied = true
		s.log.Info("device login denied", "user_code", formatUserCode(uc))
		return nil
	}
	if _, seen := s.users[user]; !seen {
		s.users[user] = now
		s.log.Info("user created", "user", user)
	}
	g.user = user
	s.log.Info("device login approved", "user_code", formatUserCode(uc), "user", user)
	return nil
}

// sweepLocked drops expired refresh grants, and device grants a lifetime after they expired (until
// then a poll learns expired_token rather than an unknown code). Caller holds s.mu.
func (s *Server) sweepLocked(now time.Time) {
	for dc, g := range s.devices {
		if !now.Before(g.expires.Add(deviceCodeLifetime)) {
			s.dropDeviceLocked(dc, g)
		}
	}
	for rt, g := range s.refresh {
		if !now.Before(g.expires) {
			delete(s.refresh, rt)
		}
	}
}

// dropDeviceLocked forgets a device grant. Caller holds s.mu.
func (s *Server) dropDeviceLocked(dc string, g *deviceGrant) {
	delete(s.devices, dc)
	delete(s.codes, g.userCode)
}
