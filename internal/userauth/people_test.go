package userauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/broker/brokertest"
	"github.com/gocotal/cotal/wire"
)

const (
	ownerA = "u_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	ownerB = "u_bbbbbbbbbbbbbbbbbbbbbbbbbb"
)

var testHash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" // sha256("test")

func grant(t *testing.T, p *People, r *Row) *Row {
	t.Helper()
	got, err := p.Grant(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestPeopleGrantGet(t *testing.T) {
	kv := newTestStore(t, brokertest.JetStream(t))
	p := newPeople(t, kv)
	ctx := t.Context()
	in := &Row{Owner: ownerA, Actor: "cli", Scope: []string{"spawn", "role:dev"}, AllowSubscribe: []string{"team.>"}, AllowPublish: []string{"team.backend"}, Role: "dev", Label: "david laptop"}
	r1 := grant(t, p, in)
	if _, err := wire.ParseLifecycleUID(string(r1.LifecycleUID)); err != nil {
		t.Fatal(err)
	}
	got, err := p.Get(ctx, ownerA, "cli")
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
	if got, _ := p.Get(ctx, ownerA, "cli"); got.LifecycleUID != r2.LifecycleUID {
		t.Fatal("Get does not read the newest row")
	}

	// The row is one key of its kind's key space, and the kind is no field of it.
	e, err := kv.Get(ctx, "actor."+ownerA+".cli")
	if err != nil {
		t.Fatalf("the interactive row's key: %v", err)
	}
	if stored, err := ParseRow(KindInteractive, ownerA, "cli", e.Value()); err != nil || stored.LifecycleUID != r2.LifecycleUID {
		t.Fatalf("stored row %s: %v", e.Value(), err)
	}
	if bytes.Contains(e.Value(), []byte("interactive")) {
		t.Fatalf("the stored row names its kind: %s", e.Value())
	}
	if _, err := kv.Get(ctx, "managed."+ownerA+".cli"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("an interactive grant wrote a managed key: %v", err)
	}
	if _, err := p.Get(ctx, ownerA, "nobody"); !errors.Is(err, ErrNoRow) {
		t.Fatalf("Get of an ungranted actor: %v, want ErrNoRow", err)
	}
	if _, err := p.GetKind(ctx, KindManaged, ownerA, "cli"); !errors.Is(err, ErrNoRow) {
		t.Fatalf("GetKind(managed) of an interactive row: %v, want ErrNoRow", err)
	}
	for _, bad := range [][2]string{{"local", "cli"}, {ownerA, "a.b"}, {ownerA, ">"}, {"u_x*", "cli"}} {
		if _, err := p.Get(ctx, bad[0], bad[1]); !errors.Is(err, ErrNoRow) {
			t.Fatalf("Get(%q, %q) = %v, want ErrNoRow", bad[0], bad[1], err)
		}
	}
}

func TestPeopleRevoke(t *testing.T) {
	kv := newTestStore(t, brokertest.JetStream(t))
	p := newPeople(t, kv)
	ctx := t.Context()
	grant(t, p, &Row{Owner: ownerA, Actor: "cli"})
	if err := p.Revoke(ctx, ownerA, "cli"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Get(ctx, ownerA, "cli"); !errors.Is(err, ErrNoRow) {
		t.Fatalf("Get after Revoke: %v", err)
	}
	if err := p.Revoke(ctx, ownerA, "cli"); !errors.Is(err, ErrNoRow) {
		t.Fatalf("second Revoke: %v, want ErrNoRow", err)
	}
	// A purged key is no row either, and a row that does not even decode is revoked all the same.
	grant(t, p, &Row{Owner: ownerA, Actor: "cli"})
	if err := kv.Purge(ctx, "actor."+ownerA+".cli"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Get(ctx, ownerA, "cli"); !errors.Is(err, ErrNoRow) {
		t.Fatalf("Get after a purge: %v", err)
	}
	if rows, err := p.List(ctx); err != nil || len(rows) != 0 {
		t.Fatalf("List after a purge: %v %v", rows, err)
	}
	if _, err := kv.Put(ctx, "actor."+ownerA+".cli", []byte("{")); err != nil {
		t.Fatal(err)
	}
	if err := p.Revoke(ctx, ownerA, "cli"); err != nil {
		t.Fatalf("Revoke of a corrupt row: %v", err)
	}
	if _, err := p.Get(ctx, ownerA, "cli"); !errors.Is(err, ErrNoRow) {
		t.Fatalf("Get after revoking a corrupt row: %v", err)
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
	js := brokertest.JetStream(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPeople(t, newTestStore(t, js))
			if _, err := p.Grant(t.Context(), &tt.row); err == nil {
				t.Fatal("Grant accepted the row")
			}
			if rows, err := p.List(t.Context()); err != nil || len(rows) != 0 {
				t.Fatalf("List after a refused grant: %v %v", rows, err)
			}
		})
	}
}

func TestPeopleGrantRefusesAnOversizedRow(t *testing.T) {
	p := newTestPeople(t)
	acl := make([]string, maxACLEntries)
	for i := range acl {
		acl[i] = "team." + strings.Repeat("x", 60) + "." + string(rune('a'+i%26))
	}
	if _, err := p.Grant(t.Context(), &Row{Owner: ownerA, Actor: "cli", AllowSubscribe: acl}); err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Fatalf("Grant of a row no read would take: %v", err)
	}
}

func TestPeopleReadDenies(t *testing.T) {
	valid := func(actor string) []byte {
		b, _ := json.Marshal(Row{Ver: 1, Owner: ownerA, Actor: actor, Scope: []string{}, AllowSubscribe: []string{}, AllowPublish: []string{}, LifecycleUID: "abcdefghijklmnopqrstuvwxyz234567"})
		return b
	}
	with := func(field string, v any) []byte {
		var m map[string]any
		_ = json.Unmarshal(valid("cli"), &m)
		m[field] = v
		b, _ := json.Marshal(m)
		return b
	}
	interactive, managed := "actor."+ownerA+".cli", "managed."+ownerA+".cli"
	tests := []struct {
		name string
		rows map[string][]byte
	}{
		{"corrupt", map[string][]byte{interactive: []byte("{")}},
		{"empty", map[string][]byte{interactive: {}}},
		{"wrong ver", map[string][]byte{interactive: with("ver", 2)}},
		{"missing lists", map[string][]byte{interactive: []byte(`{"ver":1,"owner":"` + ownerA + `","actor":"cli","lifecycleUid":"abcdefghijklmnopqrstuvwxyz234567","grantedAt":1}`)}},
		{"unknown field", map[string][]byte{interactive: with("admin", true)}},
		{"trailing data", map[string][]byte{interactive: append(valid("cli"), "{}"...)}},
		{"oversized", map[string][]byte{interactive: append(valid("cli"), bytes.Repeat([]byte(" "), maxRowSize)...)}},
		{"key and body disagree", map[string][]byte{interactive: valid("other")}},
		{"managed row without a token hash", map[string][]byte{managed: valid("cli")}},
		{"token hash on an interactive row", map[string][]byte{interactive: with("tokenHash", testHash)}},
		{"in both kinds", map[string][]byte{interactive: valid("cli"), managed: with("tokenHash", testHash)}},
	}
	js := brokertest.JetStream(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kv := newTestStore(t, js)
			p := newPeople(t, kv)
			ctx := t.Context()
			for key, value := range tt.rows {
				if _, err := kv.Put(ctx, key, value); err != nil {
					t.Fatal(err)
				}
			}
			r, err := p.Get(ctx, ownerA, "cli")
			if err == nil || errors.Is(err, ErrNoRow) {
				t.Fatalf("Get = %+v, %v; want an error other than ErrNoRow", r, err)
			}
			if _, err := p.GetKind(ctx, KindInteractive, ownerA, "cli"); err == nil {
				t.Fatal("GetKind accepted the row")
			}
			if _, err := p.List(ctx); err == nil {
				t.Fatal("List accepted the ledger")
			}
		})
	}
}

func TestPeopleRowErrorNamesTheKey(t *testing.T) {
	kv := newTestStore(t, brokertest.JetStream(t))
	p := newPeople(t, kv)
	ctx := t.Context()
	if _, err := kv.Put(ctx, "managed."+ownerA+".bot", []byte("{")); err != nil {
		t.Fatal(err)
	}
	_, err := p.Get(ctx, ownerA, "bot")
	if re, ok := errors.AsType[*RowError](err); !ok || re.Key != "managed."+ownerA+".bot" {
		t.Fatalf("Get of a corrupt row: %v, want a *RowError naming its key", err)
	}
}

func TestPeopleListDeniesKeysOutsideTheGrammar(t *testing.T) {
	js := brokertest.JetStream(t)
	for _, key := range []string{"actor." + ownerA, "actor.local.cli", "managed." + ownerA + ".cli.x", "actor.u_short.cli"} {
		t.Run(key, func(t *testing.T) {
			kv := newTestStore(t, js)
			p := newPeople(t, kv)
			grant(t, p, &Row{Owner: ownerB, Actor: "cli"})
			if _, err := kv.Put(t.Context(), key, []byte("{}")); err != nil {
				t.Fatal(err)
			}
			if _, err := p.List(t.Context()); !isRowError(err) {
				t.Fatalf("List = %v, want a *RowError", err)
			}
		})
	}
	// The store's other records are no rows of the ledger.
	kv := newTestStore(t, js)
	p := newPeople(t, kv)
	grant(t, p, &Row{Owner: ownerB, Actor: "cli"})
	for _, key := range []string{"manager.abcdefghijklmnopqrstuvwxyz", "node.n1"} {
		if _, err := kv.Put(t.Context(), key, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	if rows, err := p.List(t.Context()); err != nil || len(rows) != 1 {
		t.Fatalf("List beside other records = %v, %v", rows, err)
	}
}

func isRowError(err error) bool {
	_, ok := errors.AsType[*RowError](err)
	return ok
}

func TestPeopleUnavailableDenies(t *testing.T) {
	js := brokertest.JetStream(t)
	p := newPeople(t, newTestStore(t, js))
	grant(t, p, &Row{Owner: ownerA, Actor: "cli"})
	js.Conn().Close()
	ctx := t.Context()
	if _, err := p.Get(ctx, ownerA, "cli"); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNoRow) {
		t.Fatalf("Get on a store that does not answer: %v, want ErrUnavailable", err)
	}
	if _, err := p.List(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("List on a store that does not answer: %v, want ErrUnavailable", err)
	}
	if _, err := p.Grant(ctx, &Row{Owner: ownerA, Actor: "cli2"}); err == nil {
		t.Fatal("Grant on a store that does not answer")
	}
	if err := p.Revoke(ctx, ownerA, "cli"); err == nil || errors.Is(err, ErrNoRow) {
		t.Fatalf("Revoke on a store that does not answer: %v", err)
	}
}

func TestPeopleKindsStayDisjoint(t *testing.T) {
	p := newTestPeople(t)
	ctx := t.Context()
	grant(t, p, &Row{Owner: ownerA, Actor: "cli"})
	if _, err := p.GrantManaged(ctx, &Row{Owner: ownerA, Actor: "cli", TokenHash: testHash, LifecycleUID: wire.NewLifecycleUID()}); err == nil {
		t.Fatal("a managed row shadowed an interactive one")
	}
	if _, err := p.GrantManaged(ctx, &Row{Owner: ownerA, Actor: "bot", TokenHash: testHash, LifecycleUID: wire.NewLifecycleUID()}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Grant(ctx, &Row{Owner: ownerA, Actor: "bot"}); err == nil {
		t.Fatal("an interactive row shadowed a managed one")
	}
	if _, err := p.GrantManaged(ctx, &Row{Owner: ownerA, Actor: "bot2", LifecycleUID: wire.NewLifecycleUID()}); err == nil {
		t.Fatal("a managed row without a token hash was written")
	}
	if _, err := p.GrantManaged(ctx, &Row{Owner: ownerA, Actor: "bot2", TokenHash: testHash}); err == nil {
		t.Fatal("a managed row without a lifecycle UID was written")
	}
	rows, err := p.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Actor != "bot" || rows[0].Kind != KindManaged || rows[1].Actor != "cli" || rows[1].Kind != KindInteractive {
		t.Fatalf("List = %+v", rows)
	}
}

// racingKV is a real store whose every Put is followed at once by a managed row of the same
// principal: the other kind's write a grant races.
type racingKV struct {
	jetstream.KeyValue
	managed []byte
}

func (k racingKV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	rev, err := k.KeyValue.Put(ctx, key, value)
	if err == nil {
		_, err = k.KeyValue.Put(ctx, "managed."+strings.TrimPrefix(key, "actor."), k.managed)
	}
	return rev, err
}

// TestPeopleGrantUndoesItsWriteOnARace shows a grant that finds a row of the other kind appeared
// beside its own write take its write back: at most one of the two survives.
func TestPeopleGrantUndoesItsWriteOnARace(t *testing.T) {
	kv := newTestStore(t, brokertest.JetStream(t))
	ctx := t.Context()
	mg, err := json.Marshal(Row{Ver: 1, Owner: ownerA, Actor: "cli", Scope: []string{}, AllowSubscribe: []string{}, AllowPublish: []string{},
		TokenHash: testHash, LifecycleUID: wire.NewLifecycleUID()})
	if err != nil {
		t.Fatal(err)
	}
	racing := newPeople(t, racingKV{KeyValue: kv, managed: mg})
	if _, err := racing.Grant(ctx, &Row{Owner: ownerA, Actor: "cli"}); err == nil || !strings.Contains(err.Error(), "appeared concurrently") {
		t.Fatalf("Grant racing a managed row: %v", err)
	}
	row, err := newPeople(t, kv).Get(ctx, ownerA, "cli")
	if err != nil || row.Kind != KindManaged {
		t.Fatalf("after the race: %+v %v, want the managed row alone", row, err)
	}
}

func TestPeopleImport(t *testing.T) {
	p := newTestPeople(t)
	ctx := t.Context()
	raw, err := json.Marshal(Row{Ver: 1, Owner: ownerA, Actor: "cli", Scope: []string{"spawn"}, AllowSubscribe: []string{">"}, AllowPublish: []string{},
		LifecycleUID: "abcdefghijklmnopqrstuvwxyz234567", GrantedAt: 42})
	if err != nil {
		t.Fatal(err)
	}
	old, err := ParseRow(KindInteractive, ownerA, "cli", raw)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second import finds the very row: no error
		if err := p.Import(ctx, old); err != nil {
			t.Fatal(err)
		}
	}
	got, err := p.Get(ctx, ownerA, "cli")
	if err != nil || got.LifecycleUID != old.LifecycleUID || got.GrantedAt != 42 {
		t.Fatalf("imported row %+v, %v: want the lifecycle and grant time it had", got, err)
	}
	other := old.Clone()
	other.Scope = []string{"admin"}
	if err := p.Import(ctx, other); err == nil || !strings.Contains(err.Error(), "actor."+ownerA+".cli") {
		t.Fatalf("Import over another row: %v, want an error naming the key", err)
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
	ctx := t.Context()
	if _, err := p.GrantManaged(ctx, managed("kid", nil)); err != nil {
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
			if _, err := p.GrantManaged(t.Context(), managed("kid2", mutate)); !errors.Is(err, ErrDenied) {
				t.Fatalf("GrantManaged err = %v, want an envelope refusal", err)
			}
		})
	}

	// Grandchild within the child, the child within the boss: fine until the boss narrows.
	if _, err := p.GrantManaged(ctx, managed("grandkid", func(r *Row) { r.Parent = ownerA + ".kid"; r.AllowSubscribe = []string{"team.backend"} })); err != nil {
		t.Fatal(err)
	}
	gk, _ := p.Get(ctx, ownerA, "grandkid")
	grant(t, p, &Row{Owner: ownerA, Actor: "boss", Scope: []string{"role:dev"}, AllowSubscribe: []string{"team.>"}, AllowPublish: []string{"team.*"}})
	if err := p.CheckEnvelope(ctx, gk); !errors.Is(err, ErrDenied) {
		t.Fatalf("after narrowing an ancestor: %v, want a refusal", err)
	}
	// An admin ancestor ends the walk.
	grant(t, p, &Row{Owner: ownerA, Actor: "boss", Scope: []string{"admin"}})
	if err := p.CheckEnvelope(ctx, gk); err != nil {
		t.Fatalf("under an admin ancestor: %v", err)
	}
	// A cycle denies: boss re-granted (interactive rows are not attenuated) under its grandchild.
	grant(t, p, &Row{Owner: ownerA, Actor: "boss", Scope: []string{"spawn", "role:dev"}, AllowSubscribe: []string{"team.>"}, AllowPublish: []string{"team.*"}, Parent: ownerA + ".grandkid"})
	if err := p.CheckEnvelope(ctx, gk); !errors.Is(err, ErrDenied) {
		t.Fatalf("a parent cycle: %v, want a refusal", err)
	}
}

// TestPeopleGrantOver: a grant over the row as read writes only while the store still holds that
// row; one that changed, appeared or went in between is ErrChanged, and nothing is written.
func TestPeopleGrantOver(t *testing.T) {
	p := newTestPeople(t)
	ctx := t.Context()
	in := &Row{Owner: ownerA, Actor: "cli", Scope: []string{"spawn"}}
	first, err := p.GrantOver(ctx, nil, in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.GrantOver(ctx, nil, in); !errors.Is(err, ErrChanged) {
		t.Fatalf("a grant of a new row over one that appeared: %v, want ErrChanged", err)
	}
	read, err := p.Get(ctx, ownerA, "cli")
	if err != nil || read.Revision != first.Revision {
		t.Fatalf("the row as read: %+v %v; written at revision %d", read, err, first.Revision)
	}
	next := read.Clone()
	next.Scope = append(next.Scope, "admin")
	second, err := p.GrantOver(ctx, read, next)
	if err != nil {
		t.Fatal(err)
	}
	stale := read.Clone()
	stale.Scope = append(stale.Scope, "supervise")
	if _, err := p.GrantOver(ctx, read, stale); !errors.Is(err, ErrChanged) {
		t.Fatalf("a grant over a row replaced since it was read: %v, want ErrChanged", err)
	}
	if got, err := p.Get(ctx, ownerA, "cli"); err != nil || got.LifecycleUID != second.LifecycleUID || got.Has("supervise") {
		t.Fatalf("after the stale grant: %+v %v; want the second grant's row", got, err)
	}
	// A revocation deletes only the row it read; a grant over a row revoked since is refused.
	if err := p.RevokeOver(ctx, read); !errors.Is(err, ErrChanged) {
		t.Fatalf("a revocation of a row replaced since it was read: %v, want ErrChanged", err)
	}
	if err := p.RevokeOver(ctx, second); err != nil {
		t.Fatal(err)
	}
	if _, err := p.GrantOver(ctx, second, stale); !errors.Is(err, ErrChanged) {
		t.Fatalf("a grant over a row revoked since it was read: %v, want ErrChanged", err)
	}
	if _, err := p.Get(ctx, ownerA, "cli"); !errors.Is(err, ErrNoRow) {
		t.Fatalf("after the revocation: %v, want ErrNoRow", err)
	}
}
