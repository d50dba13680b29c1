package space

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// Agent names what ProvisionAgent creates durables for.
type Agent struct {
	Lifecycle wire.Lifecycle
	// Role, when set, also gets its shared task durable.
	Role string
	// AllowSubscribe is the read ACL minted into the agent's credential; ProvisionAgent records
	// it as the lifecycle's ACL row, which the delivery daemon re-checks before every durable
	// hand-off.
	AllowSubscribe []string
	// First marks the principal's first lifecycle: no lifecycle of the principal came before it,
	// so no predecessor's interval ends anywhere on DM, and its activation frontier is the stream's
	// start. A DM stored for the principal before it ever ran is then delivered to it.
	First bool
}

// ProvisionAgent pre-creates an agent lifecycle's durables, which the agent's credential may bind
// but never create (SPEC §8): dm_<o>-<a>-<uid> on DM starting after the activation frontier, so a
// successor inherits none of a predecessor's messages (a first lifecycle's frontier is the
// stream's start: see Agent.First); dlv_<o>-<a>-<uid> on DLV; and svc_<role> on
// TASK when the agent has a role. An existing dm_ durable is kept as it is, so its frontier never
// moves. The connection needs the provisioner profile's grants.
func ProvisionAgent(ctx context.Context, js jetstream.JetStream, space wire.Space, a Agent) error {
	if a.Lifecycle.Principal.IsZero() {
		return &wire.ValidationError{Field: "lifecycle", Rule: "is required"}
	}
	if _, err := wire.ParseLifecycleUID(string(a.Lifecycle.UID)); err != nil {
		return err
	}
	if err := ensureDM(ctx, js, space, a.Lifecycle, a.First); err != nil {
		return err
	}
	dlv := jetstream.ConsumerConfig{
		Durable:       wire.DLVDurable(a.Lifecycle),
		FilterSubject: meshwire.DlvSubject(space, a.Lifecycle),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       meshwire.AckWait,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if err := createConsumer(ctx, js, space.DLVStream(), dlv); err != nil {
		return err
	}
	if err := WriteACL(ctx, js, space, a.Lifecycle, a.AllowSubscribe, true); err != nil {
		return err
	}
	if a.Role == "" {
		return nil
	}
	return ProvisionRole(ctx, js, space, a.Role)
}

// ProvisionRole creates the task durable svc_<role> shared by every member of role. No deliver
// policy is set, so the server's (all) applies, as in the reference.
func ProvisionRole(ctx context.Context, js jetstream.JetStream, space wire.Space, role string) error {
	name, err := wire.TaskDurable(role)
	if err != nil {
		return err
	}
	filter, err := space.AnycastFilter(role)
	if err != nil {
		return err
	}
	cfg := jetstream.ConsumerConfig{Durable: name, FilterSubject: filter, AckPolicy: jetstream.AckExplicitPolicy, AckWait: meshwire.AckWait}
	return createConsumer(ctx, js, space.TaskStream(), cfg)
}

// ensureDM creates the dm_ durable at the activation frontier: the DM stream's last sequence when
// the lifecycle is provisioned (deliver all on a stream never written, as the reference does), or
// the stream's start for a principal's first lifecycle.
func ensureDM(ctx context.Context, js jetstream.JetStream, space wire.Space, l wire.Lifecycle, first bool) error {
	stream, name := space.DMStream(), wire.DMDurable(l)
	if _, err := js.Consumer(ctx, stream, name); err == nil {
		return nil
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("inspect durable %s on %s: %w", name, stream, err)
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("read the activation frontier of %s: %w", stream, err)
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       name,
		FilterSubject: meshwire.DMFilter(space, l.Principal),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       meshwire.AckWait,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if frontier := st.CachedInfo().State.LastSeq; frontier > 0 && !first {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, frontier+1
	}
	_, err = js.CreateConsumer(ctx, stream, cfg)
	if err == nil {
		return nil
	}
	if _, perr := js.Consumer(ctx, stream, name); perr == nil {
		return nil // a concurrent provisioner of the same lifecycle won
	}
	return fmt.Errorf("create durable %s on %s: %w", name, stream, err)
}

// createConsumer creates a durable, succeeding when an identical one exists. A different existing
// one is an error naming it, never replaced.
func createConsumer(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig) error {
	_, err := js.CreateConsumer(ctx, stream, cfg)
	if errors.Is(err, jetstream.ErrConsumerExists) {
		return fmt.Errorf("create durable %s on %s: one with a different configuration exists (left untouched): %w", cfg.Durable, stream, err)
	}
	if err != nil {
		return fmt.Errorf("create durable %s on %s: %w", cfg.Durable, stream, err)
	}
	return nil
}

// WriteACL records a lifecycle's read ACL in the ACL bucket with a revision-checked write. A
// reissue (at mint) also sets the ceiling the credential carries; otherwise the ACL may only
// narrow within that ceiling, and an empty list revokes every read (the daemon then hands the
// lifecycle nothing more). The connection needs the provisioner profile's grants.
func WriteACL(ctx context.Context, js jetstream.JetStream, space wire.Space, l wire.Lifecycle, allow []string, reissue bool) error {
	for _, ch := range allow {
		if err := wire.ValidateChannelPattern(ch); err != nil {
			return err
		}
	}
	bucket := meshwire.ACLBucket(space)
	kv, err := js.KeyValue(ctx, string(bucket))
	if err != nil {
		return fmt.Errorf("open %s: %w", bucket, err)
	}
	key := meshwire.ACLKey(l)
	row := meshwire.ACLRow{AllowSubscribe: nonNil(allow), IssuedAllowSubscribe: nonNil(allow), Revision: 1, UpdatedAt: wire.MillisOf(time.Now())}
	entry, err := kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		if !reissue {
			return fmt.Errorf("no ACL row for %s to narrow", l)
		}
		if _, err := kv.Create(ctx, key, mustJSON(row)); err != nil {
			return fmt.Errorf("write the ACL of %s: %w", l, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("read the ACL of %s: %w", l, err)
	}
	var old meshwire.ACLRow
	if json.Unmarshal(entry.Value(), &old) == nil {
		row.Revision = old.Revision + 1
		if !reissue {
			row.IssuedAllowSubscribe = nonNil(old.IssuedAllowSubscribe)
			for _, ch := range allow {
				if !wire.ChannelInAllow(old.IssuedAllowSubscribe, ch) {
					return fmt.Errorf("ACL of %s: %q is above the minted ceiling %q; mint a new credential", l, ch, old.IssuedAllowSubscribe)
				}
			}
		}
	}
	if _, err := kv.Update(ctx, key, mustJSON(row), entry.Revision()); err != nil {
		return fmt.Errorf("write the ACL of %s: %w", l, err)
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// mustJSON encodes a row type of this package, which always encodes.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("space: encode %T: %v", v, err))
	}
	return b
}
