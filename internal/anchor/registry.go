package anchor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// The registry is the space's records bucket: signer.<keyId>.spec holds an Anchor, written once
// when the key is registered and again when its window closes; signer.<keyId>.status holds its
// Status once it is revoked. Only the operator's side writes them (SPEC §13.9).

// Registry reads and writes one space's anchors.
type Registry struct {
	Space wire.Space
	// Conn reads, leader-served.
	Conn *nats.Conn
	// JS writes; nil for a registry that only reads.
	JS jetstream.JetStream
}

func (r Registry) bucket() wire.Bucket { return meshwire.RecordsBucket(r.Space) }

// Register writes a new anchor's spec, create-only: a key id registered already is refused.
func (r Registry) Register(ctx context.Context, a *Anchor) error {
	if err := a.Validate(); err != nil {
		return err
	}
	raw, _ := json.Marshal(a) // strings, numbers and lists always encode
	_, err := r.JS.Publish(ctx, r.bucket().Subject(meshwire.SignerKey(a.KeyID, meshwire.RecordSpecLeaf)), raw, jetstream.WithExpectLastSequencePerSubject(0))
	if err != nil {
		return fmt.Errorf("register anchor %s: %w", a.KeyID, err)
	}
	return nil
}

// CloseWindow ends the window of the anchor keyID at: it signs nothing after, while what it
// signed before still verifies. A window that closed earlier stays as it is.
func (r Registry) CloseWindow(ctx context.Context, keyID string, at time.Time) error {
	key := meshwire.SignerKey(keyID, meshwire.RecordSpecLeaf)
	e, err := kvget.Get(ctx, r.Conn, r.bucket(), key)
	if err != nil {
		return fmt.Errorf("close the window of anchor %s: %w", keyID, err)
	}
	var a Anchor
	if err := json.Unmarshal(e.Value, &a); err != nil {
		return fmt.Errorf("close the window of anchor %s: its record: %w", keyID, err)
	}
	if end := wire.MillisOf(at); end < a.ValidTo {
		a.ValidTo = max(end, a.ValidFrom)
		raw, _ := json.Marshal(&a) // as above
		if _, err := r.JS.Publish(ctx, r.bucket().Subject(key), raw, jetstream.WithExpectLastSequencePerSubject(e.Revision)); err != nil {
			return fmt.Errorf("close the window of anchor %s: %w", keyID, err)
		}
	}
	return nil
}

// Get reads anchor keyID with its revocation, leader-served: nil, nil when the registry has no
// such key.
func (r Registry) Get(ctx context.Context, keyID string) (*Anchor, error) {
	if ValidateKeyID(keyID) != nil {
		return nil, nil // no record can have it
	}
	e, err := kvget.Get(ctx, r.Conn, r.bucket(), meshwire.SignerKey(keyID, meshwire.RecordSpecLeaf))
	switch {
	case errors.Is(err, kvget.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case e.Deleted:
		return nil, nil
	}
	a, err := decode(e.Value)
	if err != nil {
		return nil, fmt.Errorf("anchor %s: %w", keyID, err)
	}
	st, err := kvget.Get(ctx, r.Conn, r.bucket(), meshwire.SignerKey(keyID, meshwire.RecordStatusLeaf))
	switch {
	case errors.Is(err, kvget.ErrNotFound):
	case err != nil:
		return nil, err
	case !st.Deleted:
		var s Status
		if err := json.Unmarshal(st.Value, &s); err != nil {
			return nil, fmt.Errorf("anchor %s's status: %w", keyID, err)
		}
		a.Revoked = s.Revoked
	}
	return a, nil
}

// Resolver returns a Resolver that reads the registry afresh under ctx for each key.
func (r Registry) Resolver(ctx context.Context) Resolver {
	return func(keyID string) (*Anchor, error) { return r.Get(ctx, keyID) }
}

// List returns every registered anchor with its revocation, ordered by key id.
func (r Registry) List(ctx context.Context) ([]Anchor, error) {
	specs, revoked := map[string]*Anchor{}, map[string]bool{}
	b := r.bucket()
	err := kvget.Scan(ctx, r.Conn, b.Stream(), b.Subject(meshwire.SignerKeys()), func(m *kvget.Stored) error {
		// signer.<keyId>.<leaf>, after the bucket's prefix
		parts := strings.SplitN(strings.TrimPrefix(m.Subject, b.Subject("")), ".", 3)
		if len(parts) != 3 {
			return nil
		}
		id, leaf := parts[1], parts[2]
		if op := m.Header.Get(jsapi.KVOperation); op == jsapi.KVDelete || op == jsapi.KVPurge {
			if leaf == meshwire.RecordSpecLeaf {
				delete(specs, id)
			}
			delete(revoked, id)
			return nil
		}
		switch leaf {
		case meshwire.RecordSpecLeaf:
			a, err := decode(m.Data)
			if err != nil {
				return fmt.Errorf("anchor %s: %w", id, err)
			}
			specs[id] = a
		case meshwire.RecordStatusLeaf:
			var s Status
			if err := json.Unmarshal(m.Data, &s); err != nil {
				return fmt.Errorf("anchor %s's status: %w", id, err) // as Get: a status unread revokes nothing silently
			}
			revoked[id] = s.Revoked
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the anchors of %s: %w", r.Space, err)
	}
	out := make([]Anchor, 0, len(specs))
	for id, a := range specs {
		a.Revoked = revoked[id]
		out = append(out, *a)
	}
	slices.SortFunc(out, func(x, y Anchor) int { return strings.Compare(x.KeyID, y.KeyID) })
	return out, nil
}

func decode(raw []byte) (*Anchor, error) {
	var a Anchor
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, err
	}
	return &a, a.Validate()
}

// Signer is a registered key and its private half, held in memory only.
type Signer struct {
	Anchor Anchor
	kp     nkeys.KeyPair
}

// NewSigner makes a fresh key for role, scoped to scope, owned by owner, valid from now for
// life. Its key id is the role and the start of the digest of its public key.
func NewSigner(role Role, scope []string, owner string, now time.Time, life time.Duration) (*Signer, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(pub))
	return &Signer{kp: kp, Anchor: Anchor{
		KeyID: string(role) + "-" + hex.EncodeToString(sum[:8]), PublicKey: pub, Owner: owner,
		Roles: []Role{role}, Scope: map[Role][]string{role: scope},
		ValidFrom: wire.MillisOf(now), ValidTo: wire.MillisOf(now.Add(life)),
	}}, nil
}

// Sign signs input with the key.
func (s *Signer) Sign(input []byte) (string, error) { return Sign(s.kp, input) }
