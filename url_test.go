package cotal

import (
	"errors"
	"slices"
	"testing"

	"github.com/gocotal/cotal/wire"
)

func TestParseURL(t *testing.T) {
	tests := []struct {
		in       string
		server   string
		tls      bool
		space    wire.Space
		channels []string
		token    string
		user     string
	}{
		{"cotals://tok@h/s?channels=a,b", "tls://h:4222", true, "s", []string{"a", "b"}, "tok", ""},
		{"cotal://127.0.0.1:4333/main", "nats://127.0.0.1:4333", false, "main", nil, "", ""},
		{"cotal://u:p@host/main?channel=team.>&channel=general", "nats://host:4222", false, "main", []string{"team.>", "general"}, "", "u"},
		{"cotal://[::1]/main", "nats://[::1]:4222", false, "main", nil, "", ""},
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222", false, "", nil, "", ""},
		{"tls://broker:4443", "tls://broker:4443", true, "", nil, "", ""},
		{"nats://a:4222,nats://b:4222, nats://c:4222", "nats://a:4222,nats://b:4222,nats://c:4222", false, "", nil, "", ""},
		{"tls://a:4443,tls://b:4443", "tls://a:4443,tls://b:4443", true, "", nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseURL(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got.Server != tt.server || got.TLS != tt.tls || got.Space != tt.space || !slices.Equal(got.Channels, tt.channels) || got.Token != tt.token || got.User != tt.user {
				t.Errorf("ParseURL = %+v", got)
			}
		})
	}
}

func TestParseURLRefuses(t *testing.T) {
	for _, in := range []string{
		"", "http://h/main", "cotal://h", "cotal://h/", "cotal:///main", "cotal://h:0/main", "cotal://h:99999/main",
		"cotal://h/a.b", "cotal://h/main?channel=a..b", "cotal://h/main?channel=foo/bar", "nats://", "%zz",
		"nats://a:1,tls://b:2", "nats://a:1,", "nats://a:1,cotal://h/main", "tls://a:1,nats://b:2",
	} {
		if _, err := ParseURL(in); !errors.Is(err, wire.ErrInvalid) {
			t.Errorf("ParseURL(%q) = %v, want ErrInvalid", in, err)
		}
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"cotals://tok@h/s?channels=a,b", "cotal://u:p@[::1]:1/main?channel=x", "nats://h:1", "cotal://h/%00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := ParseURL(in)
		if err == nil && got.Server == "" {
			t.Fatalf("ParseURL(%q) accepted with no server", in)
		}
	})
}
