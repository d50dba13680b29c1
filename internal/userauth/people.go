package userauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// Kind is which of the ledger's two row spaces a row lives in. The kind is the key space, never a
// field of the row, so no partial write can turn a managed agent into a human-exchangeable one.
type Kind int

// The row kinds.
const (
	// KindInteractive rows (keys actor.<owner>.<actor>) are written by `cotal actor grant` and
	// exchanged with an IdP proof.
	KindInteractive Kind = iota + 1
	// KindManaged rows (keys managed.<owner>.<actor>) are written by the spawn path, carry the
	// hash of the agent's secret, and are exchanged only with that secret.
	KindManaged
)

// String returns "interactive" or "managed".
func (k Kind) String() string {
	switch k {
	case KindInteractive:
		return "interactive"
	case KindManaged:
		return "managed"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// prefix starts the keys of the kind's rows in the user-auth store.
func (k Kind) prefix() string {
	if k == KindManaged {
		return "managed."
	}
	return "actor."
}

// other returns the other kind.
func (k Kind) other() Kind {
	if k == KindManaged {
		return KindInteractive
	}
	return KindManaged
}

// Ledger row limits.
const (
	rowVer        = 1
	maxRowSize    = 64 << 10
	maxACLEntries = 1024
	maxLabelLen   = 200
	// maxEnvelopeDepth bounds a delegation walk; a real chain is a handful of spawns deep.
	maxEnvelopeDepth = 64
)

// Row is one granted (owner, actor) of the people ledger: what a bearer for it may carry and
// what the callout mints for it. Rows come from People; a Row returned by People is a copy the
// caller may keep.
type Row struct {
	// Ver is the row format's version, 1.
	Ver int `json:"ver"`
	// Owner is the derived owner token, never the IdP subject.
	Owner string `json:"owner"`
	// Actor is the actor under that owner.
	Actor string `json:"actor"`
	// Scope is the capability list (ValidateScope).
	Scope []string `json:"scope"`
	// AllowSubscribe and AllowPublish are the channel read and post ACLs, channel patterns.
	AllowSubscribe []string `json:"allowSubscribe"`
	AllowPublish   []string `json:"allowPublish"`
	// Role is the task-queue role the actor serves, if any.
	Role string `json:"role,omitempty"`
	// Parent is the spawning principal "<owner>.<actor>" of a delegated row.
	Parent string `json:"parent,omitempty"`
	// Label is an operator's note for listings; never the IdP subject.
	Label string `json:"label,omitempty"`
	// TokenHash is the lowercase SHA-256 hex of a managed agent's secret. Required in managed
	// rows, refused in interactive ones.
	TokenHash string `json:"tokenHash,omitempty"`
	// LifecycleUID is the row's current incarnation; every bearer names it.
	LifecycleUID wire.LifecycleUID `json:"lifecycleUid"`
	// GrantedAt is when the row was written, in Unix milliseconds.
	GrantedAt int64 `json:"grantedAt"`

	// Kind is the row space the row was read from or written to.
	Kind Kind `json:"-"`
	// Revision is the store's revision of the row as it was read or written: GrantOver replaces
	// the row only while it is still at this revision.
	Revision uint64 `json:"-"`
}

// Has reports whether the row's scope holds scope exactly. No scope implies another.
func (r *Row) Has(scope string) bool { return slices.Contains(r.Scope, scope) }

// Principal returns the row's principal. A row from People always has a valid one.
func (r *Row) Principal() wire.Principal {
	p, _ := wire.NewPrincipal(r.Owner, r.Actor) // validated when the row was read or written
	return p
}

// Clone returns a copy of the row that shares nothing with it.
func (r *Row) Clone() *Row {
	c := *r
	c.Scope = slices.Clone(r.Scope)
	c.AllowSubscribe = slices.Clone(r.AllowSubscribe)
	c.AllowPublish = slices.Clone(r.AllowPublish)
	return &c
}

// validate checks r as a row of kind.
func (r *Row) validate(kind Kind) error {
	if r.Ver != rowVer {
		return fmt.Errorf("unknown row version %d, want %d", r.Ver, rowVer)
	}
	if !wire.IsDerivedOwner(r.Owner) {
		return fmt.Errorf("owner %q is not a derived owner token", r.Owner)
	}
	if err := wire.ValidateActor(r.Actor); err != nil {
		return err
	}
	if r.Scope == nil || r.AllowSubscribe == nil || r.AllowPublish == nil {
		return errors.New("scope, allowSubscribe and allowPublish must be explicit lists")
	}
	if err := ValidateScopes(r.Scope); err != nil {
		return err
	}
	for _, acl := range [][]string{r.AllowSubscribe, r.AllowPublish} {
		if len(acl) > maxACLEntries {
			return fmt.Errorf("%d channel entries, at most %d", len(acl), maxACLEntries)
		}
		for _, ch := range acl {
			if err := wire.ValidateChannelPattern(ch); err != nil {
				return err
			}
		}
	}
	if r.Role != "" {
		if err := ValidateRole(r.Role); err != nil {
			return err
		}
	}
	if r.Parent != "" {
		if err := validateParent(r.Parent); err != nil {
			return fmt.Errorf("parent: %w", err)
		}
		if r.Parent == r.Owner+"."+r.Actor {
			return errors.New("a row cannot be its own parent")
		}
	}
	if err := validateLabel(r.Label); err != nil {
		return err
	}
	switch {
	case kind == KindInteractive && r.TokenHash != "":
		return errors.New("an interactive row must not carry a token hash")
	case kind == KindManaged && !isLowerHex(r.TokenHash, 64):
		return errors.New("a managed row needs tokenHash, a lowercase SHA-256 hex digest")
	}
	if _, err := wire.ParseLifecycleUID(string(r.LifecycleUID)); err != nil {
		return err
	}
	if r.GrantedAt < 0 {
		return errors.New("grantedAt is negative")
	}
	return nil
}

func validateLabel(l string) error {
	if len(l) > maxLabelLen || !utf8.ValidString(l) || strings.IndexFunc(l, unicode.IsControl) >= 0 {
		return fmt.Errorf("label must be at most %d bytes of printable UTF-8", maxLabelLen)
	}
	return nil
}

// ParseRow reads raw as the row of kind stored for (owner, actor): at most 64 KiB, strictly
// decoded (an unknown field or trailing data refuses it), valid for its kind, and naming that
// very principal. Every stored row is read through it; a row it refuses never grants anything.
func ParseRow(kind Kind, owner, actor string, raw []byte) (*Row, error) {
	if len(raw) > maxRowSize {
		return nil, fmt.Errorf("row is over %d bytes", maxRowSize)
	}
	var r Row
	if err := decodeStrict(raw, &r); err != nil {
		return nil, fmt.Errorf("not a ledger row: %w", err)
	}
	if err := r.validate(kind); err != nil {
		return nil, err
	}
	if r.Owner != owner || r.Actor != actor {
		return nil, fmt.Errorf("row names %s.%s, not the principal it is stored for", r.Owner, r.Actor)
	}
	r.Kind = kind
	return &r, nil
}

// encodeRow returns the stored form of a valid row, refusing one over the size cap, which no
// read would take.
func encodeRow(r *Row) ([]byte, error) {
	doc, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	if len(doc) > maxRowSize {
		return nil, fmt.Errorf("row is %d bytes, over %d", len(doc), maxRowSize)
	}
	return doc, nil
}

// People is the people (actor) ledger of one space, kept in the space's user-auth store
// (meshwire.UserAuthBucket): one key per row, actor.<owner>.<actor> for an interactive row and
// managed.<owner>.<actor> for a managed one. Every read goes to the store, whose stream leader
// answers it, so a grant or revoke made on any node bites at the very next exchange or connect on
// every node. A corrupt or misnamed row, a principal granted in both kinds, or a store that does
// not answer never grants anything.
//
// People is safe for concurrent use, also across processes and nodes: a write replaces one key.
// The zero value is not usable; use OpenPeople.
type People struct {
	kv  jetstream.KeyValue
	now func() time.Time
}

// OpenPeople returns the ledger kept in kv. An empty store grants no one. It returns an error for
// a nil kv.
func OpenPeople(kv jetstream.KeyValue) (*People, error) {
	if kv == nil {
		return nil, errors.New("open people ledger: no user-auth store")
	}
	return &People{kv: kv, now: time.Now}, nil
}

// rowKey returns the key of (owner, actor)'s row of kind. A name that cannot be a row's is simply
// not granted: its error matches ErrNoRow, and it never reaches the store.
func rowKey(kind Kind, owner, actor string) (string, error) {
	if _, err := wire.NewPrincipal(owner, actor); err != nil || !wire.IsDerivedOwner(owner) {
		return "", fmt.Errorf("people ledger: %q.%q is not a principal with a derived owner: %w", owner, actor, ErrNoRow)
	}
	return kind.prefix() + owner + "." + actor, nil
}

// unavailable is a read of key the store did not answer: it denies, and matches ErrUnavailable,
// so an exchange answers 503 and its caller tries again.
func unavailable(key string, err error) error {
	return fmt.Errorf("%w: people ledger %s: %w", ErrUnavailable, key, err)
}

// Get returns the row of (owner, actor) from whichever kind holds it: the read of the connect
// boundary, which serves bearers of both exchanges. It returns an error matching ErrNoRow when
// neither does, and any other error (a corrupt or misnamed row, a principal in both kinds, a store
// that does not answer) when the ledger cannot be trusted for this principal; both must deny.
func (p *People) Get(ctx context.Context, owner, actor string) (*Row, error) {
	in, errIn := p.read(ctx, KindInteractive, owner, actor)
	mg, errMg := p.read(ctx, KindManaged, owner, actor)
	switch {
	case errIn != nil && !errors.Is(errIn, ErrNoRow):
		return nil, errIn
	case errMg != nil && !errors.Is(errMg, ErrNoRow):
		return nil, errMg
	case in != nil && mg != nil:
		return nil, fmt.Errorf("people ledger: %s.%s is granted both %s and %s; a broken ledger denies", owner, actor, KindInteractive, KindManaged)
	case in != nil:
		return in, nil
	case mg != nil:
		return mg, nil
	}
	return nil, fmt.Errorf("people ledger: %s.%s: %w", owner, actor, ErrNoRow)
}

// GetKind returns the row of (owner, actor) of kind only: the read of an exchange, which the IdP
// path makes on interactive rows and the secret path on managed ones. The other kind is consulted
// too, and a principal present in both is an error. A missing row matches ErrNoRow.
func (p *People) GetKind(ctx context.Context, kind Kind, owner, actor string) (*Row, error) {
	r, err := p.Get(ctx, owner, actor)
	if err != nil {
		return nil, err
	}
	if r.Kind != kind {
		return nil, fmt.Errorf("people ledger: %s.%s has a %s row, not a %s one: %w", owner, actor, r.Kind, kind, ErrNoRow)
	}
	return r, nil
}

// read reads one row fresh. A deleted key is no row.
func (p *People) read(ctx context.Context, kind Kind, owner, actor string) (*Row, error) {
	key, err := rowKey(kind, owner, actor)
	if err != nil {
		return nil, err
	}
	e, err := p.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, ErrNoRow
	case err != nil:
		return nil, unavailable(key, err)
	}
	r, err := ParseRow(kind, owner, actor, e.Value())
	if err != nil {
		return nil, &RowError{Key: key, Err: err}
	}
	r.Revision = e.Revision()
	return r, nil
}

// exists reports whether key holds a row, readable or not.
func (p *People) exists(ctx context.Context, key string) (bool, error) {
	_, err := p.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	case err != nil:
		return false, unavailable(key, err)
	}
	return true, nil
}

// Grant writes r as the interactive row of (r.Owner, r.Actor), replacing any previous one whole,
// and returns the row as stored. Each grant mints a new lifecycle UID, so a bearer minted before
// the grant is refused at its next connect; GrantedAt is set to now. It returns an error for an
// invalid row, a row carrying a token hash, or a principal that already has a managed row.
func (p *People) Grant(ctx context.Context, r *Row) (*Row, error) {
	return p.grant(ctx, r, nil)
}

// ErrChanged is a GrantOver whose previous row changed (or appeared) since it was read: another
// grant or a revocation came first. Read the row again and grant over what it holds then.
var ErrChanged = errors.New("userauth: the row changed since it was read")

// GrantOver is Grant for a row read as prev (nil: the person had none): it writes only while the
// store still holds prev at its revision, and otherwise fails matching ErrChanged, so two grants
// that each change the row read are never merged into one that holds only the last's changes.
func (p *People) GrantOver(ctx context.Context, prev, r *Row) (*Row, error) {
	var rev uint64
	if prev != nil && prev.Kind == KindInteractive { // a managed prev: the write refuses to shadow it
		if prev.Owner != r.Owner || prev.Actor != r.Actor {
			return nil, fmt.Errorf("grant %s.%s over the row of %s.%s", r.Owner, r.Actor, prev.Owner, prev.Actor)
		}
		rev = prev.Revision
	}
	return p.grant(ctx, r, &rev)
}

// grant writes r as a new incarnation, over the revision at when set (0: no row).
func (p *People) grant(ctx context.Context, r *Row, at *uint64) (*Row, error) {
	row := r.Clone()
	row.Ver, row.Kind = rowVer, KindInteractive
	row.LifecycleUID = wire.NewLifecycleUID()
	if err := p.prepare(row); err != nil {
		return nil, err
	}
	return p.writeAt(ctx, row, at)
}

// GrantManaged writes r as the managed row of (r.Owner, r.Actor), replacing any previous one
// whole, and returns the row as stored. The row keeps the lifecycle UID the spawn path chose and
// must carry TokenHash. It must stay within its spawner's envelope (CheckEnvelope). It returns an
// error for an invalid row, an envelope breach, or a principal that already has an interactive
// row.
func (p *People) GrantManaged(ctx context.Context, r *Row) (*Row, error) {
	row := r.Clone()
	row.Ver, row.Kind = rowVer, KindManaged
	if err := p.prepare(row); err != nil {
		return nil, err
	}
	if err := p.CheckEnvelope(ctx, row); err != nil {
		return nil, fmt.Errorf("grant %s.%s: %w", row.Owner, row.Actor, err)
	}
	return p.writeAt(ctx, row, nil)
}

// prepare stamps row with the grant time, turns nil lists into empty ones and validates it.
func (p *People) prepare(row *Row) error {
	row.GrantedAt = p.now().UnixMilli()
	for _, acl := range []*[]string{&row.Scope, &row.AllowSubscribe, &row.AllowPublish} {
		if *acl == nil {
			*acl = []string{}
		}
	}
	if err := row.validate(row.Kind); err != nil {
		return fmt.Errorf("grant %s.%s: %w", row.Owner, row.Actor, err)
	}
	return nil
}

// writeAt stores a prepared row under its kind's key, refusing to shadow a row of the other kind.
// With at set it writes only over that revision of the key (0: the key holds no row), and
// otherwise fails matching ErrChanged.
func (p *People) writeAt(ctx context.Context, row *Row, at *uint64) (*Row, error) {
	key, err := rowKey(row.Kind, row.Owner, row.Actor)
	if err != nil {
		return nil, err
	}
	other := row.Kind.other()
	otherKey, err := rowKey(other, row.Owner, row.Actor)
	if err != nil {
		return nil, err
	}
	switch has, err := p.exists(ctx, otherKey); {
	case err != nil:
		return nil, fmt.Errorf("grant %s.%s: %w", row.Owner, row.Actor, err)
	case has:
		return nil, fmt.Errorf("grant %s.%s: the principal already has a %s row; revoke it first", row.Owner, row.Actor, other)
	}
	doc, err := encodeRow(row)
	if err != nil {
		return nil, fmt.Errorf("grant %s.%s: %w", row.Owner, row.Actor, err)
	}
	var rev uint64
	switch {
	case at == nil:
		rev, err = p.kv.Put(ctx, key, doc)
	case *at == 0:
		rev, err = p.kv.Create(ctx, key, doc)
	default:
		rev, err = p.kv.Update(ctx, key, doc, *at)
	}
	if at != nil && (errors.Is(err, jetstream.ErrKeyExists) || jsapi.Conflict(err)) {
		return nil, fmt.Errorf("grant %s.%s: %w", row.Owner, row.Actor, ErrChanged)
	}
	if err != nil {
		return nil, fmt.Errorf("grant %s.%s: write %s: %w", row.Owner, row.Actor, key, err)
	}
	// A grant racing a write of the other kind for the same name: at most one row survives. If
	// the undo fails, Get's both-kinds check still denies the pair.
	if has, err := p.exists(ctx, otherKey); err != nil || has {
		if err == nil {
			err = fmt.Errorf("a %s row appeared concurrently", other)
		}
		// Only this grant's own write, unless another write replaced it since.
		if derr := p.kv.Delete(ctx, key, jetstream.LastRevision(rev)); derr != nil {
			return nil, fmt.Errorf("grant %s.%s: %w, and taking the grant back failed: %w", row.Owner, row.Actor, err, derr)
		}
		return nil, fmt.Errorf("grant %s.%s: %w; the grant is taken back", row.Owner, row.Actor, err)
	}
	got := row.Clone()
	got.Revision = rev
	return got, nil
}

// Import writes r, a row of r.Kind read from an older ledger (ParseRow), as it is: its lifecycle
// UID and grant time are kept, so the bearers minted for it stay good. It writes only a key that
// holds no row yet or holds this very row; another row under the key is an error naming it. A
// principal's row of the other kind is not looked for: a ledger imported whole has the rows it
// had.
func (p *People) Import(ctx context.Context, r *Row) error {
	if r.Kind != KindInteractive && r.Kind != KindManaged {
		return fmt.Errorf("import %s.%s: unknown row kind %s", r.Owner, r.Actor, r.Kind)
	}
	if err := r.validate(r.Kind); err != nil {
		return fmt.Errorf("import %s.%s: %w", r.Owner, r.Actor, err)
	}
	key, err := rowKey(r.Kind, r.Owner, r.Actor)
	if err != nil {
		return err
	}
	doc, err := encodeRow(r)
	if err != nil {
		return fmt.Errorf("import %s.%s: %w", r.Owner, r.Actor, err)
	}
	if err := jsapi.CreateOnce(ctx, p.kv, key, doc); err != nil {
		return fmt.Errorf("import %s row %s.%s: %w", r.Kind, r.Owner, r.Actor, err)
	}
	return nil
}

// Revoke deletes the interactive row of (owner, actor). New exchanges and connects are refused at
// once; a live connection ends with its bearer. It returns an error matching ErrNoRow when there
// was no such row.
func (p *People) Revoke(ctx context.Context, owner, actor string) error {
	return p.remove(ctx, KindInteractive, owner, actor)
}

// RevokeOver deletes r, an interactive row as read, only while the store still holds it at its
// revision: a row another grant replaced since fails matching ErrChanged, so a revocation never
// deletes an incarnation it did not read (and would not retire).
func (p *People) RevokeOver(ctx context.Context, r *Row) error {
	if r.Kind != KindInteractive {
		return fmt.Errorf("revoke %s row %s.%s: %w", KindInteractive, r.Owner, r.Actor, ErrNoRow)
	}
	key, err := rowKey(r.Kind, r.Owner, r.Actor)
	if err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	err = p.kv.Delete(ctx, key, jetstream.LastRevision(r.Revision))
	if errors.Is(err, jetstream.ErrKeyExists) || jsapi.Conflict(err) {
		return fmt.Errorf("revoke %s row %s.%s: %w", r.Kind, r.Owner, r.Actor, ErrChanged)
	}
	if err != nil {
		return fmt.Errorf("revoke %s row %s.%s: %w", r.Kind, r.Owner, r.Actor, err)
	}
	return nil
}

// RevokeManaged deletes the managed row of (owner, actor), as Revoke does.
func (p *People) RevokeManaged(ctx context.Context, owner, actor string) error {
	return p.remove(ctx, KindManaged, owner, actor)
}

// remove deletes the row of kind, readable or not.
func (p *People) remove(ctx context.Context, kind Kind, owner, actor string) error {
	key, err := rowKey(kind, owner, actor)
	if err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	has, err := p.exists(ctx, key)
	switch {
	case err != nil:
		return fmt.Errorf("revoke %s row %s.%s: %w", kind, owner, actor, err)
	case !has:
		return fmt.Errorf("revoke %s row %s.%s: %w", kind, owner, actor, ErrNoRow)
	}
	if err := p.kv.Delete(ctx, key); err != nil {
		return fmt.Errorf("revoke %s row %s.%s: %w", kind, owner, actor, err)
	}
	return nil
}

// List returns every row of both kinds, sorted by owner then actor. A row that cannot be read, a
// key outside the grammar, a principal in both kinds, or a store that does not answer fails the
// whole listing: an auth ledger never skips what it cannot read.
func (p *People) List(ctx context.Context) ([]*Row, error) {
	var rows []*Row
	seen := make(map[string]Kind)
	for _, kind := range []Kind{KindInteractive, KindManaged} {
		keys, err := jsapi.ListKeys(ctx, p.kv, kind.prefix()+">")
		if err != nil {
			return nil, fmt.Errorf("%w: list people ledger: %w", ErrUnavailable, err)
		}
		for _, key := range keys {
			pr, err := wire.ParsePrincipal(strings.TrimPrefix(key, kind.prefix()))
			if err != nil || !wire.IsDerivedOwner(pr.Owner()) {
				return nil, &RowError{Key: key, Err: fmt.Errorf("not a key %s<owner>.<actor>", kind.prefix())}
			}
			r, err := p.read(ctx, kind, pr.Owner(), pr.Actor())
			if errors.Is(err, ErrNoRow) {
				continue // revoked since it was listed
			}
			if err != nil {
				return nil, err
			}
			if k, dup := seen[pr.String()]; dup {
				return nil, fmt.Errorf("people ledger: %s is granted both %s and %s; a broken ledger denies", pr, k, kind)
			}
			seen[pr.String()] = kind
			rows = append(rows, r)
		}
	}
	slices.SortFunc(rows, func(a, b *Row) int {
		if c := strings.Compare(a.Owner, b.Owner); c != 0 {
			return c
		}
		return strings.Compare(a.Actor, b.Actor)
	})
	return rows, nil
}

// CheckEnvelope checks that r stays within the grant of every ancestor along its parent links:
// scope by set inclusion, channel ACLs by pattern containment, a role only if the spawner holds
// role:<r>, and the same owner throughout. The walk stops at a row holding admin (the operator's
// authority) or a row without a parent; a missing ancestor, a cycle, or a chain deeper than 64
// denies. The error matches ErrDenied, and ErrUnavailable too when the store did not answer.
func (p *People) CheckEnvelope(ctx context.Context, r *Row) error {
	seen := map[string]bool{r.Owner + "." + r.Actor: true}
	child := r
	for depth := 0; child.Parent != ""; depth++ {
		if depth == maxEnvelopeDepth {
			return fmt.Errorf("%w: delegation chain of %s.%s is deeper than %d", ErrDenied, r.Owner, r.Actor, maxEnvelopeDepth)
		}
		if seen[child.Parent] {
			return fmt.Errorf("%w: delegation chain of %s.%s has a cycle at %s", ErrDenied, r.Owner, r.Actor, child.Parent)
		}
		seen[child.Parent] = true
		pp, err := wire.ParsePrincipal(child.Parent)
		if err != nil {
			return fmt.Errorf("%w: parent of %s.%s: %v", ErrDenied, child.Owner, child.Actor, err)
		}
		parent, err := p.Get(ctx, pp.Owner(), pp.Actor())
		if err != nil {
			return fmt.Errorf("%w: spawner %s of %s.%s is not granted: %w", ErrDenied, pp, r.Owner, r.Actor, err)
		}
		if parent.Has(ScopeAdmin) {
			return nil
		}
		if err := withinParent(child, parent); err != nil {
			return fmt.Errorf("%w: %s.%s exceeds its spawner %s: %v", ErrDenied, child.Owner, child.Actor, pp, err)
		}
		child = parent
	}
	return nil
}

// withinParent checks one delegation link.
func withinParent(child, parent *Row) error {
	if child.Owner != parent.Owner {
		return errors.New("a different owner; cross-owner spawns are admin launches only")
	}
	if !Within(child.Scope, parent.Scope) {
		return fmt.Errorf("scope %v beyond %v", child.Scope, parent.Scope)
	}
	for _, ch := range child.AllowSubscribe {
		if !patternWithin(parent.AllowSubscribe, ch) {
			return fmt.Errorf("read %q beyond %v", ch, parent.AllowSubscribe)
		}
	}
	for _, ch := range child.AllowPublish {
		if !patternWithin(parent.AllowPublish, ch) {
			return fmt.Errorf("post %q beyond %v", ch, parent.AllowPublish)
		}
	}
	if child.Role != "" && !parent.Has(ScopeRolePrefix+child.Role) {
		return fmt.Errorf("role %q needs %s%s in the spawner's scope", child.Role, ScopeRolePrefix, child.Role)
	}
	return nil
}

// patternWithin reports whether some entry of allow covers every channel the pattern p covers.
func patternWithin(allow []string, p string) bool {
	return slices.ContainsFunc(allow, func(a string) bool { return meshwire.PatternCovers(a, p) })
}
