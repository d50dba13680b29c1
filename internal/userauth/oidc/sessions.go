package oidc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gocotal/cotal/internal/atomicfile"
)

const (
	// sessionsVersion is the "ver" of the sessions file this package reads and writes.
	sessionsVersion = 1
	// minIDTokenLife is how much life a cached ID token must have left to be handed out.
	minIDTokenLife = 60 * time.Second
	// maxSessionsFile caps the sessions file read.
	maxSessionsFile = 4 << 20
)

// DefaultSessionsPath returns ~/.cotal/idp-sessions.json, or an error if the home directory is
// unknown.
func DefaultSessionsPath() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("locate sessions file: %w", err)
	}
	return filepath.Join(home, ".cotal", "idp-sessions.json"), nil
}

// Session is one cached login: the tokens a provider issued to a client for a person.
type Session struct {
	// Issuer is the provider's issuer.
	Issuer string
	// ClientID is the client the tokens were issued to.
	ClientID string
	// IDToken is the latest ID token; a bearer secret.
	IDToken string
	// RefreshToken redeems a new ID token; a bearer secret; may be empty.
	RefreshToken string
	// Subject is the verified sub of the ID token.
	Subject string
	// Name is the verified display name, possibly empty.
	Name string
	// ExpiresAt is the ID token's exp.
	ExpiresAt time.Time
	// Aliases are other keys the login is found under (Find): the exchange URLs of a mesh's
	// other nodes.
	Aliases []string
}

// String returns the session with its tokens redacted.
func (s Session) String() string {
	return fmt.Sprintf("Session{Issuer:%s ClientID:%s Subject:%s Name:%s ExpiresAt:%s IDToken:REDACTED RefreshToken:REDACTED}",
		s.Issuer, s.ClientID, s.Subject, s.Name, s.ExpiresAt.UTC().Format(time.RFC3339))
}

// LogValue implements slog.LogValuer, redacting the tokens.
func (s Session) LogValue() slog.Value {
	return slog.GroupValue(slog.String("issuer", s.Issuer), slog.String("client_id", s.ClientID),
		slog.String("subject", s.Subject), slog.Time("expires_at", s.ExpiresAt))
}

// sessionJSON is a Session as stored in the file.
type sessionJSON struct {
	Issuer       string   `json:"issuer"`
	ClientID     string   `json:"clientId"`
	IDToken      string   `json:"idToken"`
	RefreshToken string   `json:"refreshToken"`
	Subject      string   `json:"subject"`
	Name         string   `json:"name"`
	ExpiresAt    int64    `json:"expiresAt"` // unix milliseconds
	Aliases      []string `json:"aliases,omitempty"`
}

// sessionsFile is the file's top level.
type sessionsFile struct {
	Ver      int                        `json:"ver"`
	Sessions map[string]json.RawMessage `json:"sessions"`
}

// Sessions is the cache of logins kept in the sessions file, keyed by a caller-chosen key (the
// CLI uses the mesh URL). Entries are kept as they were read until replaced, so an entry this
// package cannot read is neither lost nor rewritten. The zero value is an empty cache. A Sessions
// is not safe for concurrent use.
type Sessions struct {
	entries map[string]json.RawMessage
}

// LoadSessions reads the sessions file at path. A missing file is an empty cache. A file that is
// not a version-1 sessions file gives an error matching [ErrCorruptSessions] that names it; the
// file is left as it is.
func LoadSessions(path string) (*Sessions, error) {
	entries, err := readSessions(path)
	if err != nil {
		return nil, err
	}
	return &Sessions{entries: entries}, nil
}

// readSessions reads and checks the file at path; a missing file gives an empty map.
func readSessions(path string) (map[string]json.RawMessage, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]json.RawMessage{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read sessions %s: %w", path, err)
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, maxSessionsFile+1)); err != nil {
		return nil, fmt.Errorf("read sessions %s: %w", path, err)
	}
	if buf.Len() > maxSessionsFile {
		return nil, fmt.Errorf("read sessions %s: over %d bytes: %w", path, maxSessionsFile, ErrCorruptSessions)
	}
	var sf sessionsFile
	if err := json.Unmarshal(buf.Bytes(), &sf); err != nil {
		return nil, fmt.Errorf("read sessions %s: %w: %w", path, ErrCorruptSessions, err)
	}
	if sf.Ver != sessionsVersion {
		return nil, fmt.Errorf("read sessions %s: ver %d, want %d: %w", path, sf.Ver, sessionsVersion, ErrCorruptSessions)
	}
	if sf.Sessions == nil {
		return nil, fmt.Errorf("read sessions %s: no sessions object: %w", path, ErrCorruptSessions)
	}
	return sf.Sessions, nil
}

// Get returns the session stored under key. It fails with [ErrNoSession] if there is none, and
// with an error matching [ErrCorruptSessions] if the entry is not a session this package wrote.
func (s *Sessions) Get(key string) (Session, error) {
	raw, ok := s.entries[key]
	if !ok {
		return Session{}, fmt.Errorf("session %q: %w", key, ErrNoSession)
	}
	var j sessionJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return Session{}, fmt.Errorf("session %q: %w: %w", key, ErrCorruptSessions, err)
	}
	sess := Session{
		Issuer:       j.Issuer,
		ClientID:     j.ClientID,
		IDToken:      j.IDToken,
		RefreshToken: j.RefreshToken,
		Subject:      j.Subject,
		Name:         j.Name,
		ExpiresAt:    time.UnixMilli(j.ExpiresAt),
		Aliases:      j.Aliases,
	}
	if err := sess.validate(); err != nil {
		return Session{}, fmt.Errorf("session %q: %w: %w", key, ErrCorruptSessions, err)
	}
	return sess, nil
}

// Find returns the session stored under the first of keys that has one, or else the first whose
// aliases hold one of keys, with the key it is stored under. It fails as Get does, with the first
// key named.
func (s *Sessions) Find(keys ...string) (string, Session, error) {
	for _, k := range keys {
		if _, ok := s.entries[k]; ok {
			sess, err := s.Get(k)
			return k, sess, err
		}
	}
	stored := slices.Sorted(maps.Keys(s.entries))
	for _, k := range keys {
		for _, key := range stored {
			var j sessionJSON
			if json.Unmarshal(s.entries[key], &j) == nil && slices.Contains(j.Aliases, k) {
				sess, err := s.Get(key)
				return key, sess, err
			}
		}
	}
	first := ""
	if len(keys) > 0 {
		first = keys[0]
	}
	return "", Session{}, fmt.Errorf("session %q: %w", first, ErrNoSession)
}

// Put stores sess under key, replacing any previous entry. It fails for an empty key or a
// session without issuer, client id, subject or ID token.
func (s *Sessions) Put(key string, sess Session) error {
	if key == "" {
		return errors.New("put session: empty key")
	}
	if err := sess.validate(); err != nil {
		return fmt.Errorf("put session %q: %w", key, err)
	}
	raw, err := json.Marshal(sessionJSON{
		Issuer:       sess.Issuer,
		ClientID:     sess.ClientID,
		IDToken:      sess.IDToken,
		RefreshToken: sess.RefreshToken,
		Subject:      sess.Subject,
		Name:         sess.Name,
		ExpiresAt:    sess.ExpiresAt.UnixMilli(),
		Aliases:      sess.Aliases,
	})
	if err != nil {
		return fmt.Errorf("put session %q: %w", key, err)
	}
	if s.entries == nil {
		s.entries = map[string]json.RawMessage{}
	}
	s.entries[key] = raw
	return nil
}

// Delete removes the session under key, if any.
func (s *Sessions) Delete(key string) {
	delete(s.entries, key)
}

// Save writes the cache to path atomically, as a 0600 file in a 0700 directory. It refuses to
// replace a file that exists but is not a sessions file (an error matching
// [ErrCorruptSessions]): that file may hold something the person wants back.
func (s *Sessions) Save(path string) error {
	if _, err := readSessions(path); err != nil {
		return fmt.Errorf("save sessions: %w", err)
	}
	entries := s.entries
	if entries == nil {
		entries = map[string]json.RawMessage{}
	}
	data, err := json.MarshalIndent(sessionsFile{Ver: sessionsVersion, Sessions: entries}, "", "  ")
	if err != nil {
		return fmt.Errorf("save sessions %s: %w", path, err)
	}
	if err := atomicfile.MkdirPrivate(filepath.Dir(path)); err != nil {
		return fmt.Errorf("save sessions: %w", err)
	}
	if err := atomicfile.Write(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("save sessions: %w", err)
	}
	return nil
}

// fresh reports whether s holds an ID token with at least minIDTokenLife left.
func (s *Session) fresh() bool { return s.IDToken != "" && time.Until(s.ExpiresAt) >= minIDTokenLife }

// validate checks the fields a usable session needs.
func (s Session) validate() error {
	switch {
	case s.Issuer == "":
		return errors.New("no issuer")
	case s.ClientID == "":
		return errors.New("no client id")
	case s.Subject == "":
		return errors.New("no subject")
	case s.IDToken == "":
		return errors.New("no id token")
	}
	return nil
}

// FreshIDToken returns an ID token for s with at least a minute of life left: the cached one if
// it qualifies, or else one obtained with s.RefreshToken from p, verified, after which s is updated
// (refreshed is true and the caller should save it: a login cached in a sessions file is renewed
// with [RenewStored], which does so under the file's lock). It fails with [ErrNoRefreshToken] or
// an error matching [ErrInvalidGrant] when the person must log in again, with an error matching
// [ErrInvalidToken] if the new ID token does not verify or names another subject, and with a
// plain error if p is not s's issuer.
func FreshIDToken(ctx context.Context, hc *http.Client, p *Provider, s *Session) (idToken string, refreshed bool, err error) {
	if p.Issuer != s.Issuer {
		return "", false, fmt.Errorf("fresh id token: session issuer %q is not provider %q", s.Issuer, p.Issuer)
	}
	if s.fresh() {
		return s.IDToken, false, nil
	}
	if s.RefreshToken == "" {
		return "", false, fmt.Errorf("fresh id token: %w", ErrNoRefreshToken)
	}
	toks, err := p.Refresh(ctx, hc, s.ClientID, s.RefreshToken)
	if err != nil {
		return "", false, fmt.Errorf("fresh id token: %w", err)
	}
	id, err := NewVerifier(p, s.ClientID, hc).Verify(ctx, toks.IDToken)
	if err != nil {
		return "", false, fmt.Errorf("fresh id token: %w", err)
	}
	if id.Subject != s.Subject {
		return "", false, fmt.Errorf("fresh id token: %w", invalid("refreshed token names subject %q, session is %q", id.Subject, s.Subject))
	}
	s.IDToken, s.RefreshToken, s.Name, s.ExpiresAt = toks.IDToken, toks.RefreshToken, id.Name, id.Expires
	return s.IDToken, true, nil
}

// ErrLoginReplaced is returned by [RenewStored] when the sessions file no longer holds the login a
// process started with under its key: the person logged out, or another login took its place. A
// process acting for the old login stops renewing rather than undo the logout.
var ErrLoginReplaced = errors.New("the login was ended or replaced")

// RenewStored is FreshIDToken for s, a login cached in the sessions file at path under key, for a
// process that may share that login with others (two connections of one command, a long-running
// `cotal supervise` beside a `cotal attach`). Providers rotate refresh tokens, so a refresh by one
// holder spends the token every other copy holds. While s's ID token is fresh it is returned
// with no file access. Otherwise, holding an exclusive lock beside the file, it reads the stored
// login: a newer one another holder saved is adopted into s; only if that too is stale is s
// refreshed, and the result saved for the others. It fails with [ErrLoginReplaced] when the
// stored login is gone or is another person's or provider's.
func RenewStored(ctx context.Context, hc *http.Client, p *Provider, path, key string, s *Session) (string, error) {
	if s.fresh() {
		return s.IDToken, nil
	}
	var tok string
	err := editSessions(ctx, path, func(all *Sessions) (bool, error) {
		stored, err := all.Get(key)
		switch {
		case errors.Is(err, ErrNoSession):
			return false, fmt.Errorf("%s: logged out: %w", key, ErrLoginReplaced)
		case err != nil:
			return false, err
		case stored.Issuer != s.Issuer || stored.ClientID != s.ClientID || stored.Subject != s.Subject:
			return false, fmt.Errorf("%s: the stored login is now %s's at %s: %w", key, stored.Subject, stored.Issuer, ErrLoginReplaced)
		}
		if stored.RefreshToken != s.RefreshToken && !stored.ExpiresAt.Before(s.ExpiresAt) {
			*s = stored // another holder renewed it (an older stored login is one whose save failed)
		}
		t, refreshed, err := FreshIDToken(ctx, hc, p, s)
		tok = t
		if err != nil || !refreshed {
			return false, err
		}
		return true, all.Put(key, *s)
	})
	if err != nil {
		return "", err
	}
	return tok, nil
}

// UpdateSessions applies fn to the sessions file at path and saves the result, holding the lock
// [RenewStored] takes, so a login, a logout and a renewal never undo one another.
func UpdateSessions(ctx context.Context, path string, fn func(*Sessions) error) error {
	return editSessions(ctx, path, func(all *Sessions) (bool, error) { return true, fn(all) })
}

// editSessions reads the sessions file at path under the lock beside it (the file itself is
// replaced on save, so it cannot carry the lock), applies fn, and saves the result when fn asks
// for it and succeeds. It waits for another holder of the lock until ctx ends.
func editSessions(ctx context.Context, path string, fn func(*Sessions) (save bool, err error)) error {
	if err := atomicfile.MkdirPrivate(filepath.Dir(path)); err != nil {
		return fmt.Errorf("lock sessions: %w", err)
	}
	unlock, err := atomicfile.Lock(ctx, path+".lock")
	if err != nil {
		return fmt.Errorf("lock sessions: %w", err)
	}
	defer unlock()
	all, err := LoadSessions(path)
	if err != nil {
		return err
	}
	save, err := fn(all)
	if err != nil || !save {
		return err
	}
	return all.Save(path)
}
