package userauth

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gocotal/cotal/wire"
)

const (
	ownerA = "u_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	ownerB = "u_bbbbbbbbbbbbbbbbbbbbbbbbbb"
)

var testHash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" // sha256("test")

func grant(t *testing.T, p *People, r *Row) *Row {
	t.Helper()
	got, err := p.Grant(r)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestPeopleGrantGet(t *testing.T) {
	p := newTestPeople(t)
	in := &Row{Owner: ownerA, Actor: "cli", Scope: []string{"spawn", "role:dev"}, AllowSubscribe: []string{"team.>"}, AllowPublish: []string{"team.backend"}, Role: "dev", Label: "david laptop"}
	r1 := grant(t, p, in)
	if _, err := wire.ParseLifecycleUID(string(r1.LifecycleUID)); err != nil {
		t.Fatal(err)
	}
	got, err := p.Get(ownerA, "cli")
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != KindInteractive || got.LifecycleUID != r1.LifecycleUID || got.Label != "david laptop" || !got.Has("role:dev") {
		t.Fatalf("Get = %+v", got)
	}
	r2 := grant(t, p, in)
	if r2.LifecycleUID == r1.LifecycleUID {
		t.Fatal("a re-grant kept the lifecycle UID; each interactive upsert must mint a new one")
	}
	if got, _ := p.Get(ownerA, "cli"); got.LifecycleUID != r2.LifecycleUID {
		t.Fatal("Get does not read the newest row")
	}

	fi, err := os.Stat(filepath.Join(p.Dir(), "actors", ownerA+".cli.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("row file: %v %v, want 0600", err, fi.Mode())
	}
	if di, _ := os.Stat(filepath.Join(p.Dir(), "actors")); di.Mode().Perm() != 0o700 {
		t.Fatalf("actors/ mode %v, want 0700", di.Mode().Perm())
	}
	if _, err := p.Get(ownerA, "nobody"); !errors.Is(err, ErrNoRow) {
		t.Fatalf("Get of an ungranted actor: %v, want ErrNoRow", err)
	}
	if _, err := p.GetKind(KindManaged, ownerA, "cli"); !errors.Is(err, ErrNoRow) {
		t.Fatalf("GetKind(managed) of an interactive row: %v, want ErrNoRow", err)
	}
}

func TestPeopleRevoke(t *testing.T) {
	p := newTestPeople(t)
	grant(t, p, &Row{Owner: ownerA, Actor: "cli"})
	if err := p.Revoke(ownerA, "cli"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Get(ownerA, "cli"); !errors.Is(err, ErrNoRow) {
		t.Fatalf("Get after Revoke: %v", err)
	}
	if err := p.Revoke(ownerA, "cli"); !errors.Is(err, ErrNoRow) {
		t.Fatalf("second Revoke: %v, want ErrNoRow", err)
	}
}

func TestPeopleGrantRefuses(t *testing.T) {
	tests := []struct {
		name string
		row  Row
	}{
		{"nkey owner", Row{Owner: "UAQGWOEVJKMIO4WXSYOTLARXYOZTCXFK67JASEH6AFFFYK6FOPSKQCAD", Actor: "cli"}},
		{"dev owner", Row{Owner: "local", Actor: "cli"}},
		{"dotted actor", Row{Owner: ownerA, Actor: "a.b"}},
		{"unknown scope", Row{Owner: ownerA, Actor: "cli", Scope: []string{"root"}}},
		{"scope grammar", Row{Owner: ownerA, Actor: "cli", Scope: []string{"spawn admin"}}},
		{"duplicate scope", Row{Owner: ownerA, Actor: "cli", Scope: []string{"spawn", "spawn"}}},
		{"bad role scope", Row{Owner: ownerA, Actor: "cli", Scope: []string{"role:"}}},
		{"bad channel", Row{Owner: ownerA, Actor: "cli", AllowSubscribe: []string{"a.>.b"}}},
		{"bad role", Row{Owner: ownerA, Actor: "cli", Role: "a b"}},
		{"bad parent", Row{Owner: ownerA, Actor: "cli", Parent: "boss"}},
		{"self parent", Row{Owner: ownerA, Actor: "cli", Parent: ownerA + ".cli"}},
		{"token hash on an interactive row", Row{Owner: ownerA, Actor: "cli", TokenHash: testHash}},
		{"control character label", Row{Owner: ownerA, Actor: "cli", Label: "a\nb"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestPeople(t)
			if _, err := p.Grant(&tt.row); err == nil {
				t.Fatal("Grant accepted the row")
			}
			if rows, err := p.List(); err != nil || len(rows) != 0 {
				t.Fatalf("List after a refused grant: %v %v", rows, err)
			}
		})
	}
}

func TestPeopleReadDenies(t *testing.T) {
	valid := func(actor string) []byte {
		b, _ := json.Marshal(Row{Ver: 1, Owner: ownerA, Actor: actor, Scope: []string{}, AllowSubscribe: []string{}, AllowPublish: []string{}, LifecycleUID: "abcdefghijklmnopqrstuvwxyz234567"})
		return b
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
	}{
		{"corrupt", func(t *testing.T, dir string) { write(t, dir, "actors", ownerA+".cli.json", []byte("{")) }},
		{"wrong ver", func(t *testing.T, dir string) {
			var m map[string]any
			_ = json.Unmarshal(valid("cli"), &m)
			m["ver"] = 2
			b, _ := json.Marshal(m)
			write(t, dir, "actors", ownerA+".cli.json", b)
		}},
		{"missing lists", func(t *testing.T, dir string) {
			write(t, dir, "actors", ownerA+".cli.json", []byte(`{"ver":1,"owner":"`+ownerA+`","actor":"cli","lifecycleUid":"abcdefghijklmnopqrstuvwxyz234567","grantedAt":1}`))
		}},
		{"unknown field", func(t *testing.T, dir string) {
			var m map[string]any
			_ = json.Unmarshal(valid("cli"), &m)
			m["admin"] = true
			b, _ := json.Marshal(m)
			write(t, dir, "actors", ownerA+".cli.json", b)
		}},
		{"misnamed", func(t *testing.T, dir string) { write(t, dir, "actors", ownerA+".cli.json", valid("other")) }},
		{"symlinked row", func(t *testing.T, dir string) {
			target := filepath.Join(t.TempDir(), "row.json")
			if err := os.WriteFile(target, valid("cli"), 0o600); err != nil {
				t.Fatal(err)
			}
			mkdir(t, dir, "actors")
			if err := os.Symlink(target, filepath.Join(dir, "actors", ownerA+".cli.json")); err != nil {
				t.Fatal(err)
			}
		}},
		{"symlinked directory", func(t *testing.T, dir string) {
			other := t.TempDir()
			write(t, other, "", ownerA+".cli.json", valid("cli"))
			if err := os.Symlink(other, filepath.Join(dir, "actors")); err != nil {
				t.Fatal(err)
			}
		}},
		{"directory instead of a row", func(t *testing.T, dir string) { mkdir(t, dir, filepath.Join("actors", ownerA+".cli.json")) }},
		{"managed row without a token hash", func(t *testing.T, dir string) {
			write(t, dir, "managed-actors", ownerA+".cli.json", valid("cli"))
		}},
		{"in both directories", func(t *testing.T, dir string) {
			write(t, dir, "actors", ownerA+".cli.json", valid("cli"))
			var m map[string]any
			_ = json.Unmarshal(valid("cli"), &m)
			m["tokenHash"] = testHash
			b, _ := json.Marshal(m)
			write(t, dir, "managed-actors", ownerA+".cli.json", b)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestPeople(t)
			tt.setup(t, p.Dir())
			r, err := p.Get(ownerA, "cli")
			if err == nil || errors.Is(err, ErrNoRow) {
				t.Fatalf("Get = %+v, %v; want an error other than ErrNoRow", r, err)
			}
			if _, err := p.GetKind(KindInteractive, ownerA, "cli"); err == nil {
				t.Fatal("GetKind accepted the row")
			}
			if _, err := p.List(); err == nil {
				t.Fatal("List accepted the ledger")
			}
		})
	}
}

func write(t *testing.T, dir, sub, name string, b []byte) {
	t.Helper()
	mkdir(t, dir, sub)
	if err := os.WriteFile(filepath.Join(dir, sub, name), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, dir, sub string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
		t.Fatal(err)
	}
}

func TestPeopleKindsStayDisjoint(t *testing.T) {
	p := newTestPeople(t)
	grant(t, p, &Row{Owner: ownerA, Actor: "cli"})
	if _, err := p.GrantManaged(&Row{Owner: ownerA, Actor: "cli", TokenHash: testHash, LifecycleUID: wire.NewLifecycleUID()}); err == nil {
		t.Fatal("a managed row shadowed an interactive one")
	}
	if _, err := p.GrantManaged(&Row{Owner: ownerA, Actor: "bot", TokenHash: testHash, LifecycleUID: wire.NewLifecycleUID()}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Grant(&Row{Owner: ownerA, Actor: "bot"}); err == nil {
		t.Fatal("an interactive row shadowed a managed one")
	}
	if _, err := p.GrantManaged(&Row{Owner: ownerA, Actor: "bot2", LifecycleUID: wire.NewLifecycleUID()}); err == nil {
		t.Fatal("a managed row without a token hash was written")
	}
	if _, err := p.GrantManaged(&Row{Owner: ownerA, Actor: "bot2", TokenHash: testHash}); err == nil {
		t.Fatal("a managed row without a lifecycle UID was written")
	}
	rows, err := p.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Actor != "bot" || rows[0].Kind != KindManaged || rows[1].Actor != "cli" || rows[1].Kind != KindInteractive {
		t.Fatalf("List = %+v", rows)
	}
}

func TestScopesNeverImplyEachOther(t *testing.T) {
	r := &Row{Scope: []string{"admin", "spawn"}}
	if r.Has(ScopeSupervise) {
		t.Fatal("admin and spawn imply supervise")
	}
	r = &Row{Scope: []string{"supervise"}}
	if r.Has(ScopeAdmin) || r.Has(ScopeSpawn) {
		t.Fatal("supervise implies admin or spawn")
	}
	if !Within([]string{"spawn"}, []string{"admin", "spawn"}) || Within([]string{"supervise"}, []string{"admin", "spawn"}) || !Within(nil, nil) {
		t.Fatal("Within")
	}
}

func TestEnvelope(t *testing.T) {
	p := newTestPeople(t)
	boss := grant(t, p, &Row{Owner: ownerA, Actor: "boss", Scope: []string{"spawn", "role:dev"}, AllowSubscribe: []string{"team.>"}, AllowPublish: []string{"team.*"}})
	parent := ownerA + "." + boss.Actor
	managed := func(actor string, mutate func(*Row)) *Row {
		r := &Row{Owner: ownerA, Actor: actor, Parent: parent, Scope: []string{"spawn", "role:dev"}, AllowSubscribe: []string{"team.backend", "team.*.x"}, AllowPublish: []string{"team.a"}, Role: "dev", TokenHash: testHash, LifecycleUID: wire.NewLifecycleUID()}
		if mutate != nil {
			mutate(r)
		}
		return r
	}
	if _, err := p.GrantManaged(managed("kid", nil)); err != nil {
		t.Fatalf("a row within its spawner was refused: %v", err)
	}
	for name, mutate := range map[string]func(*Row){
		"scope beyond":   func(r *Row) { r.Scope = []string{"spawn", "run"} },
		"read beyond":    func(r *Row) { r.AllowSubscribe = []string{"other"} },
		"read wider":     func(r *Row) { r.AllowSubscribe = []string{">"} },
		"post wider":     func(r *Row) { r.AllowPublish = []string{"team.>"} },
		"role beyond":    func(r *Row) { r.Role = "ops" },
		"other owner":    func(r *Row) { r.Owner = ownerB },
		"missing parent": func(r *Row) { r.Parent = ownerA + ".ghost" },
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := p.GrantManaged(managed("kid2", mutate)); !errors.Is(err, ErrDenied) {
				t.Fatalf("GrantManaged err = %v, want an envelope refusal", err)
			}
		})
	}

	// Grandchild within the child, the child within the boss: fine until the boss narrows.
	if _, err := p.GrantManaged(managed("grandkid", func(r *Row) { r.Parent = ownerA + ".kid"; r.AllowSubscribe = []string{"team.backend"} })); err != nil {
		t.Fatal(err)
	}
	gk, _ := p.Get(ownerA, "grandkid")
	grant(t, p, &Row{Owner: ownerA, Actor: "boss", Scope: []string{"role:dev"}, AllowSubscribe: []string{"team.>"}, AllowPublish: []string{"team.*"}})
	if err := p.CheckEnvelope(gk); !errors.Is(err, ErrDenied) {
		t.Fatalf("after narrowing an ancestor: %v, want a refusal", err)
	}
	// An admin ancestor ends the walk.
	grant(t, p, &Row{Owner: ownerA, Actor: "boss", Scope: []string{"admin"}})
	if err := p.CheckEnvelope(gk); err != nil {
		t.Fatalf("under an admin ancestor: %v", err)
	}
	// A cycle denies: boss re-granted (interactive rows are not attenuated) under its grandchild.
	grant(t, p, &Row{Owner: ownerA, Actor: "boss", Scope: []string{"spawn", "role:dev"}, AllowSubscribe: []string{"team.>"}, AllowPublish: []string{"team.*"}, Parent: ownerA + ".grandkid"})
	if err := p.CheckEnvelope(gk); !errors.Is(err, ErrDenied) {
		t.Fatalf("a parent cycle: %v, want a refusal", err)
	}
}
