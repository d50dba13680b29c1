package userauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// Kind is which of the ledger's two row spaces a row lives in. The kind is the directory, never a
// field of the row, so no partial write can turn a managed agent into a human-exchangeable one.
type Kind int

// The row kinds.
const (
	// KindInteractive rows (actors/) are written by `cotal actor grant` and exchanged with an IdP
	// proof.
	KindInteractive Kind = iota + 1
	// KindManaged rows (managed-actors/) are written by the spawn path, carry the hash of the
	// agent's secret, and are exchanged only with that secret.
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

// dir returns the kind's directory below the ledger root.
func (k Kind) dir() string {
	if k == KindManaged {
		return "managed-actors"
	}
	return "actors"
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
}

// Has reports whether the row's scope holds scope exactly. No scope implies another.
func (r *Row) Has(scope string) bool { return slices.Contains(r.Scope, scope) }

// Principal returns the row's principal. A row from People always has a valid one.
func (r *Row) Principal() wire.Principal {
	p, _ := wire.NewPrincipal(r.Owner, r.Actor) // validated when the row was read or written
	return p
}

func (r *Row) clone() *Row {
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

// People is the people (actor) ledger of one space: a directory holding actors/ and
// managed-actors/, one file <owner>.<actor>.json per row. Every read goes to the file, so a grant
// or revoke bites at the very next exchange or connect. A missing, unreadable, symlinked or
// misnamed row, or a principal granted in both directories, never grants anything.
//
// People is safe for concurrent use, also across processes: a write replaces one file atomically.
// The zero value is not usable; use OpenPeople.
type People struct {
	dir string
	now func() time.Time
}

// OpenPeople returns the ledger kept in dir. The directories are created (0700) on the first
// grant; an absent ledger grants no one. It returns an error for an empty dir.
func OpenPeople(dir string) (*People, error) {
	if dir == "" {
		return nil, errors.New("open people ledger: empty directory")
	}
	return &People{dir: dir, now: time.Now}, nil
}

// Dir returns the ledger's directory.
func (p *People) Dir() string { return p.dir }

func (p *People) path(kind Kind, owner, actor string) string {
	return filepath.Join(p.dir, kind.dir(), owner+"."+actor+".json")
}

// Get returns the row of (owner, actor) from whichever directory holds it: the read of the
// connect boundary, which serves bearers of both exchanges. It returns an error matching ErrNoRow
// when neither does, and any other error (a corrupt, symlinked or misnamed row, a principal in
// both directories) when the ledger cannot be trusted for this principal; both must deny.
func (p *People) Get(owner, actor string) (*Row, error) {
	in, errIn := p.read(KindInteractive, owner, actor)
	mg, errMg := p.read(KindManaged, owner, actor)
	switch {
	case errIn != nil && !errors.Is(errIn, ErrNoRow):
		return nil, errIn
	case errMg != nil && !errors.Is(errMg, ErrNoRow):
		return nil, errMg
	case in != nil && mg != nil:
		return nil, fmt.Errorf("people ledger: %s.%s is granted in both %s and %s; a broken ledger denies", owner, actor, KindInteractive.dir(), KindManaged.dir())
	case in != nil:
		return in, nil
	case mg != nil:
		return mg, nil
	}
	return nil, fmt.Errorf("people ledger: %s.%s: %w", owner, actor, ErrNoRow)
}

// GetKind returns the row of (owner, actor) from kind's directory only: the read of an exchange,
// which the IdP path makes on interactive rows and the secret path on managed ones. The other
// directory is consulted too, and a principal present in both is an error. A missing row matches
// ErrNoRow.
func (p *People) GetKind(kind Kind, owner, actor string) (*Row, error) {
	r, err := p.Get(owner, actor)
	if err != nil {
		return nil, err
	}
	if r.Kind != kind {
		return nil, fmt.Errorf("people ledger: %s.%s has a %s row, not a %s one: %w", owner, actor, r.Kind, kind, ErrNoRow)
	}
	return r, nil
}

// read reads one row file fresh, refusing a symlink or anything but a regular file.
func (p *People) read(kind Kind, owner, actor string) (*Row, error) {
	if _, err := wire.NewPrincipal(owner, actor); err != nil || !wire.IsDerivedOwner(owner) {
		// A name that cannot be a row's is simply not granted; it never reaches the filesystem.
		return nil, fmt.Errorf("people ledger: %q.%q is not a principal with a derived owner: %w", owner, actor, ErrNoRow)
	}
	if err := p.checkKindDir(kind); err != nil {
		return nil, err
	}
	path := p.path(kind, owner, actor)
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoRow
	}
	if err != nil {
		return nil, &FileError{Path: path, Err: err}
	}
	if !fi.Mode().IsRegular() {
		return nil, &FileError{Path: path, Err: errors.New("a ledger row must be a regular file, not a symlink or other file")}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoRow // revoked between the Lstat and the open
	}
	if err != nil {
		return nil, &FileError{Path: path, Err: err}
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, &FileError{Path: path, Err: errors.New("a ledger row must be a regular file")}
	}
	raw, err := io.ReadAll(io.LimitReader(f, maxRowSize+1))
	if err != nil {
		return nil, &FileError{Path: path, Err: err}
	}
	if len(raw) > maxRowSize {
		return nil, &FileError{Path: path, Err: fmt.Errorf("row is over %d bytes", maxRowSize)}
	}
	var r Row
	if err := decodeStrict(raw, &r); err != nil {
		return nil, &FileError{Path: path, Err: fmt.Errorf("not a ledger row: %w", err)}
	}
	if err := r.validate(kind); err != nil {
		return nil, &FileError{Path: path, Err: err}
	}
	if r.Owner != owner || r.Actor != actor {
		return nil, &FileError{Path: path, Err: fmt.Errorf("row names %s.%s, not the principal of its file name", r.Owner, r.Actor)}
	}
	r.Kind = kind
	return &r, nil
}

// checkKindDir checks that kind's directory, if present, is a real directory.
func (p *People) checkKindDir(kind Kind) error {
	dir := filepath.Join(p.dir, kind.dir())
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &FileError{Path: dir, Err: err}
	}
	if !fi.IsDir() {
		return &FileError{Path: dir, Err: errors.New("a row space must be a real directory, not a symlink or file")}
	}
	return nil
}

// Grant writes r as the interactive row of (r.Owner, r.Actor), replacing any previous one whole,
// and returns the row as stored. Each grant mints a new lifecycle UID, so a bearer minted before
// the grant is refused at its next connect; GrantedAt is set to now. It returns an error for an
// invalid row, a row carrying a token hash, or a principal that already has a managed row.
func (p *People) Grant(r *Row) (*Row, error) {
	row := r.clone()
	row.Ver, row.Kind = rowVer, KindInteractive
	row.LifecycleUID = wire.NewLifecycleUID()
	if err := p.prepare(row); err != nil {
		return nil, err
	}
	return p.write(row)
}

// GrantManaged writes r as the managed row of (r.Owner, r.Actor), replacing any previous one
// whole, and returns the row as stored. The row keeps the lifecycle UID the spawn path chose and
// must carry TokenHash. It must stay within its spawner's envelope (CheckEnvelope). It returns an
// error for an invalid row, an envelope breach, or a principal that already has an interactive
// row.
func (p *People) GrantManaged(r *Row) (*Row, error) {
	row := r.clone()
	row.Ver, row.Kind = rowVer, KindManaged
	if err := p.prepare(row); err != nil {
		return nil, err
	}
	if err := p.CheckEnvelope(row); err != nil {
		return nil, fmt.Errorf("grant %s.%s: %w", row.Owner, row.Actor, err)
	}
	return p.write(row)
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

// write stores a prepared row in its kind's directory, refusing to shadow a row of the other
// kind.
func (p *People) write(row *Row) (*Row, error) {
	other := row.Kind.other()
	if p.exists(other, row.Owner, row.Actor) {
		return nil, fmt.Errorf("grant %s.%s: the principal already has a %s row; revoke it first", row.Owner, row.Actor, other)
	}
	doc, err := json.MarshalIndent(row, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("grant %s.%s: %w", row.Owner, row.Actor, err)
	}
	if err := atomicfile.MkdirPrivate(filepath.Join(p.dir, row.Kind.dir())); err != nil {
		return nil, err
	}
	if err := p.checkKindDir(row.Kind); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(p.path(row.Kind, row.Owner, row.Actor), append(doc, '\n'), 0o600); err != nil {
		return nil, err
	}
	// A grant racing a write of the other kind for the same name: at most one row survives. If
	// a crash lands between the two lines, Get's both-directories check still denies.
	if p.exists(other, row.Owner, row.Actor) {
		_ = p.remove(row.Kind, row.Owner, row.Actor) // best effort; Get denies the pair anyway
		return nil, fmt.Errorf("grant %s.%s: a %s row appeared concurrently; granted neither", row.Owner, row.Actor, other)
	}
	return row.clone(), nil
}

// exists reports whether kind's directory has any entry for the principal, readable or not.
func (p *People) exists(kind Kind, owner, actor string) bool {
	_, err := os.Lstat(p.path(kind, owner, actor))
	return !errors.Is(err, fs.ErrNotExist)
}

// Revoke deletes the interactive row of (owner, actor). New exchanges and connects are refused at
// once; a live connection ends with its bearer. It returns an error matching ErrNoRow when there
// was no such row.
func (p *People) Revoke(owner, actor string) error { return p.remove(KindInteractive, owner, actor) }

// RevokeManaged deletes the managed row of (owner, actor), as Revoke does.
func (p *People) RevokeManaged(owner, actor string) error {
	return p.remove(KindManaged, owner, actor)
}

func (p *People) remove(kind Kind, owner, actor string) error {
	if _, err := wire.NewPrincipal(owner, actor); err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	if err := os.Remove(p.path(kind, owner, actor)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("revoke %s row %s.%s: %w", kind, owner, actor, ErrNoRow)
		}
		return fmt.Errorf("revoke %s row %s.%s: %w", kind, owner, actor, err)
	}
	return nil
}

// List returns every row of both directories, sorted by owner then actor. A row that cannot be
// read, a misnamed file, or a principal in both directories fails the whole listing: an auth
// ledger never skips what it cannot read.
func (p *People) List() ([]*Row, error) {
	var rows []*Row
	seen := make(map[string]Kind)
	for _, kind := range []Kind{KindInteractive, KindManaged} {
		if err := p.checkKindDir(kind); err != nil {
			return nil, err
		}
		dir := filepath.Join(p.dir, kind.dir())
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list people ledger: %w", err)
		}
		for _, e := range entries {
			name := e.Name()
			if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
				continue // an atomic write's temporary file, or not a row
			}
			pr, err := wire.ParsePrincipal(strings.TrimSuffix(name, ".json"))
			if err != nil || !wire.IsDerivedOwner(pr.Owner()) {
				return nil, &FileError{Path: filepath.Join(dir, name), Err: errors.New("file name is not <owner>.<actor>.json")}
			}
			r, err := p.read(kind, pr.Owner(), pr.Actor())
			if err != nil {
				return nil, err
			}
			if k, dup := seen[pr.String()]; dup {
				return nil, fmt.Errorf("people ledger: %s is granted in both %s and %s; a broken ledger denies", pr, k.dir(), kind.dir())
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
// denies. The error matches ErrDenied.
func (p *People) CheckEnvelope(r *Row) error {
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
		parent, err := p.Get(pp.Owner(), pp.Actor())
		if err != nil {
			return fmt.Errorf("%w: spawner %s of %s.%s is not granted: %v", ErrDenied, pp, r.Owner, r.Actor, err)
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
