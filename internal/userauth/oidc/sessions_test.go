package oidc

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func testSession() Session {
	return Session{
		Issuer: "http://127.0.0.1:4780", ClientID: testClient, IDToken: "h.p.s", RefreshToken: "rt-secret",
		Subject: "alice", Name: "Alice", ExpiresAt: time.UnixMilli(1_800_000_000_123),
	}
}

func TestSessionsRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "home", ".cotal", "idp-sessions.json")
	s, err := LoadSessions(path)
	if err != nil {
		t.Fatalf("LoadSessions of a missing file: %v", err)
	}
	if _, err := s.Get("nats://mesh"); !errors.Is(err, ErrNoSession) {
		t.Fatalf("Get on empty = %v, want ErrNoSession", err)
	}
	want := testSession()
	want.Aliases = []string{"http://b", "http://c"}
	if err := s.Put("nats://mesh", want); err != nil {
		t.Fatal(err)
	}
	if err := s.Put("nats://other", want); err != nil {
		t.Fatal(err)
	}
	s.Delete("nats://other")
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode = %v, %v; want 0600", fi.Mode(), err)
	}
	di, err := os.Stat(filepath.Dir(path))
	if err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode = %v, %v; want 0700", di.Mode(), err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"ver": 1`, `"issuer"`, `"clientId"`, `"idToken"`, `"refreshToken"`, `"subject"`, `"name"`, `"expiresAt": 1800000000123`} {
		if !strings.Contains(string(raw), field) {
			t.Errorf("file lacks %s:\n%s", field, raw)
		}
	}
	back, err := LoadSessions(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := back.Get("nats://mesh")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip = %+v, want %+v", got, want)
	}
	for _, keys := range [][]string{{"nats://mesh"}, {"http://x", "http://c"}} {
		key, found, err := back.Find(keys...)
		if err != nil || key != "nats://mesh" || !reflect.DeepEqual(found, want) {
			t.Errorf("Find(%v) = %q, %+v, %v; want the session under nats://mesh", keys, key, found, err)
		}
	}
	if _, _, err := back.Find("http://x"); !errors.Is(err, ErrNoSession) {
		t.Errorf("Find of an unknown key = %v, want ErrNoSession", err)
	}
	if _, err := back.Get("nats://other"); !errors.Is(err, ErrNoSession) {
		t.Errorf("deleted session: Get = %v, want ErrNoSession", err)
	}
	if str := got.String(); strings.Contains(str, "rt-secret") || strings.Contains(str, "h.p.s") {
		t.Errorf("String() leaks a token: %s", str)
	}
}

func TestSessionsKeepForeignEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idp-sessions.json")
	// An entry another tool wrote: kept as is, reported when read.
	foreign := `{"ver":1,"sessions":{"https://idp.example":{"token":"x","expiresAt":1,"sub":"bob"}}}`
	if err := os.WriteFile(path, []byte(foreign), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := LoadSessions(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("https://idp.example"); !errors.Is(err, ErrCorruptSessions) {
		t.Errorf("Get foreign = %v, want ErrCorruptSessions", err)
	}
	if err := s.Put("nats://mesh", testSession()); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(raw), `"sub": "bob"`) {
		t.Errorf("foreign entry lost: %s, %v", raw, err)
	}
}

func TestSessionsCorruptFileRefused(t *testing.T) {
	tests := []struct{ name, content string }{
		{name: "not JSON", content: "{nope"},
		{name: "wrong version", content: `{"ver":2,"sessions":{}}`},
		{name: "no sessions", content: `{"ver":1}`},
		{name: "sessions not an object", content: `{"ver":1,"sessions":[]}`},
		{name: "empty file", content: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "idp-sessions.json")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadSessions(path)
			if !errors.Is(err, ErrCorruptSessions) || !strings.Contains(err.Error(), path) {
				t.Fatalf("LoadSessions = %v, want ErrCorruptSessions naming %s", err, path)
			}
			var s Sessions // a fresh cache must not overwrite the corrupt file either
			if err := s.Put("nats://mesh", testSession()); err != nil {
				t.Fatal(err)
			}
			if err := s.Save(path); !errors.Is(err, ErrCorruptSessions) {
				t.Fatalf("Save over a corrupt file = %v, want ErrCorruptSessions", err)
			}
			if got, _ := os.ReadFile(path); string(got) != tt.content {
				t.Errorf("corrupt file was changed to %q", got)
			}
		})
	}
}

func TestSessionsPutValidates(t *testing.T) {
	var s Sessions
	bad := testSession()
	bad.Subject = ""
	if err := s.Put("k", bad); err == nil {
		t.Error("Put accepted a session without subject")
	}
	if err := s.Put("", testSession()); err == nil {
		t.Error("Put accepted an empty key")
	}
}

func TestDefaultSessionsPath(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	got, err := DefaultSessionsPath()
	if err != nil || got != filepath.Join(home, ".cotal", "idp-sessions.json") {
		t.Errorf("DefaultSessionsPath = %q, %v", got, err)
	}
}

func FuzzLoadSessions(f *testing.F) {
	// Seeds: a valid file, a foreign entry, a wrong version, and truncated JSON.
	f.Add([]byte(`{"ver":1,"sessions":{"k":{"issuer":"i","clientId":"c","idToken":"t","subject":"s","expiresAt":1}}}`))
	f.Add([]byte(`{"ver":1,"sessions":{"k":{"token":"x"}}}`))
	f.Add([]byte(`{"ver":2,"sessions":{}}`))
	f.Add([]byte(`{"ver":1,"sess`))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "s.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := LoadSessions(path)
		if err != nil {
			if !errors.Is(err, ErrCorruptSessions) {
				t.Fatalf("LoadSessions = %v, want ErrCorruptSessions", err)
			}
			return
		}
		for k := range s.entries {
			if _, err := s.Get(k); err != nil && !errors.Is(err, ErrCorruptSessions) {
				t.Fatalf("Get(%q) = %v", k, err)
			}
		}
	})
}
