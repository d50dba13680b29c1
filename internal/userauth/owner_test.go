package userauth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocotal/cotal/wire"
)

func TestDeriveOwnerVector(t *testing.T) {
	secret := make([]byte, 32)
	for i := range secret {
		secret[i] = byte(i)
	}
	const iss, sub = "https://idp.example", "user-123"

	// Recompute the derivation with the standard library alone, so the test is not circular.
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("cotal-owner-v1:"))
	arr, err := json.Marshal([]string{iss, sub})
	if err != nil {
		t.Fatal(err)
	}
	mac.Write(arr)
	want := "u_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(mac.Sum(nil)[:16]))

	got, err := DeriveOwner(secret, iss, sub)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("DeriveOwner = %s, stdlib recomputation = %s", got, want)
	}
	// Pinned: the reference's deriveOwnerForIdpSubject gives the same string for this input.
	if got != "u_g34qewu4qwbgftozn4lar5yudu" {
		t.Fatalf("DeriveOwner = %s, want the pinned u_g34qewu4qwbgftozn4lar5yudu", got)
	}
	if !wire.IsDerivedOwner(got) {
		t.Fatalf("%s is not a derived owner", got)
	}
}

// TestDeriveOwnerJSONStringify pins the derivation for a subject whose JSON encoding differs
// between encoding/json and ECMAScript's JSON.stringify (U+2028, '<', '&', \b, \f). The vector
// was computed with Node's createHmac over JSON.stringify([issuer, subject]).
func TestDeriveOwnerJSONStringify(t *testing.T) {
	secret := make([]byte, 32)
	for i := range secret {
		secret[i] = byte(i)
	}
	got, err := DeriveOwner(secret, "https://idp.example", "a\u2028b<&>\"\\\x01\b\f\x1f")
	if err != nil {
		t.Fatal(err)
	}
	if got != "u_awqx5qbxu6wzeb7wdombvkqk7e" {
		t.Fatalf("DeriveOwner = %s, want u_awqx5qbxu6wzeb7wdombvkqk7e", got)
	}
}

func TestJSONStringArrayMatchesEncodingJSON(t *testing.T) {
	// Where JSON.stringify and encoding/json (with HTML escaping off) agree, so must we.
	for _, s := range []string{"", "plain", "quote\"back\\slash", "tab\tnl\ncr\r", "\x00\x07\x1f\x7f", "é漢字🙂", "<&>"} {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode([]string{s, s}); err != nil {
			t.Fatal(err)
		}
		if got, want := string(jsonStringArray(s, s)), strings.TrimSuffix(b.String(), "\n"); got != want {
			t.Errorf("jsonStringArray(%q) = %s, encoding/json = %s", s, got, want)
		}
	}
}

func TestDeriveOwnerRefuses(t *testing.T) {
	tests := []struct {
		name        string
		secret      []byte
		issuer, sub string
	}{
		{"short secret", make([]byte, 31), "i", "s"},
		{"long secret", make([]byte, 33), "i", "s"},
		{"empty issuer", make([]byte, 32), "", "s"},
		{"empty subject", make([]byte, 32), "i", ""},
		{"invalid utf-8", make([]byte, 32), "i", "\xff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if o, err := DeriveOwner(tt.secret, tt.issuer, tt.sub); err == nil {
				t.Fatalf("DeriveOwner = %s, want an error", o)
			}
		})
	}
}

func TestDeriveOwnerSeparatesInputs(t *testing.T) {
	// The JSON array keeps ("a", "b|c") and ("a|b", "c") apart, and a different secret re-keys.
	a, _ := DeriveOwner(testSecret, "a", "b|c")
	b, _ := DeriveOwner(testSecret, "a|b", "c")
	c, _ := DeriveOwner(make([]byte, 32), "a", "b|c")
	if a == b || a == c {
		t.Fatalf("owners collide: %s %s %s", a, b, c)
	}
}

func TestOwnerSecretFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "owner-secret.json")
	s1, err := LoadOrCreateOwnerSecret(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(s1) != OwnerSecretSize {
		t.Fatalf("secret is %d bytes", len(s1))
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("owner-secret.json mode %v, want 0600", fi.Mode().Perm())
	}
	s2, err := LoadOrCreateOwnerSecret(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(s1) != string(s2) {
		t.Fatal("a second load returned a different secret")
	}
	var doc map[string]any
	raw, _ := os.ReadFile(path)
	if err := json.Unmarshal(raw, &doc); err != nil || doc["ver"] != float64(1) || len(doc["secret"].(string)) != 43 {
		t.Fatalf("owner-secret.json = %s", raw)
	}
}

func TestOwnerSecretCorruptIsNeverOverwritten(t *testing.T) {
	for name, content := range map[string]string{
		"not json":      "garbage",
		"wrong version": `{"ver":2,"secret":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`,
		"short secret":  `{"ver":1,"secret":"AAAA"}`,
		"padded":        `{"ver":1,"secret":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}`,
		"unknown field": `{"ver":1,"secret":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","x":1}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "owner-secret.json")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadOrCreateOwnerSecret(path)
			if _, ok := errors.AsType[*FileError](err); !ok {
				t.Fatalf("err = %v, want a *FileError", err)
			}
			if raw, _ := os.ReadFile(path); string(raw) != content {
				t.Fatalf("the corrupt file was rewritten to %s", raw)
			}
		})
	}
}
