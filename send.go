package cotal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/wire"
)

// Sent is the broker's receipt for a stored message. It says the message is stored, not that
// anyone received it.
type Sent struct {
	ID     string
	Stream string
	Seq    uint64
	// Duplicate reports that the stream already held a message with this id.
	Duplicate bool
}

// SendOption adds optional fields to a message.
type SendOption func(*wire.CotalMessage)

// Mentions names peers to wake (and, on a live channel, to copy durably).
func Mentions(names ...string) SendOption {
	return func(m *wire.CotalMessage) { m.Mentions = wire.NormalizeMentions(append(m.Mentions, names...)) }
}

// ReplyTo marks the message as a reply to id.
func ReplyTo(id string) SendOption { return func(m *wire.CotalMessage) { m.ReplyTo = id } }

// WithContextID sets the thread correlation id.
func WithContextID(id string) SendOption { return func(m *wire.CotalMessage) { m.ContextID = id } }

// Post multicasts parts to a channel.
func (c *Client) Post(ctx context.Context, channel string, parts []wire.Part, opts ...SendOption) (*Sent, error) {
	return c.send(ctx, &wire.CotalMessage{Channel: channel, Parts: parts}, opts)
}

// DirectMessage sends parts to one peer, durably (it waits in the peer's durable until read).
func (c *Client) DirectMessage(ctx context.Context, to wire.Principal, parts []wire.Part, opts ...SendOption) (*Sent, error) {
	if to.IsZero() {
		return nil, &wire.ValidationError{Field: "to", Rule: "is required"}
	}
	return c.send(ctx, &wire.CotalMessage{To: to.String(), Parts: parts}, opts)
}

// Ask hands parts to any one member of role.
func (c *Client) Ask(ctx context.Context, role string, parts []wire.Part, opts ...SendOption) (*Sent, error) {
	return c.send(ctx, &wire.CotalMessage{ToService: role, Parts: parts}, opts)
}

// Send publishes m, completing it in place with a fresh id (if it has none), the time, the space
// and the sender, on
// the subject its routing field names, through JetStream with Nats-Msg-Id = id (SPEC §8). It
// refuses, before publishing, a message that fails validation or exceeds the broker's
// max_payload (with both sizes), and a channel the credential may not post to.
func (c *Client) Send(ctx context.Context, m *wire.CotalMessage) (*Sent, error) {
	return c.send(ctx, m, nil)
}

func (c *Client) send(ctx context.Context, m *wire.CotalMessage, opts []SendOption) (*Sent, error) {
	subject, data, err := c.prepare(m, opts)
	if err != nil {
		return nil, err
	}
	ack, err := c.js.Publish(ctx, subject, data, jetstream.WithMsgID(m.ID))
	if err != nil {
		return nil, c.publishError("send "+m.ID, subject, err)
	}
	return &Sent{ID: m.ID, Stream: ack.Stream, Seq: ack.Sequence, Duplicate: ack.Duplicate}, nil
}

// prepare completes m in place (the options, a fresh id if it has none, the time, the space and
// the sender) and returns its subject and encoding, refusing what Send refuses before publishing.
func (c *Client) prepare(m *wire.CotalMessage, opts []SendOption) (string, []byte, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return "", nil, ErrClosed
	}
	for _, o := range opts {
		o(m)
	}
	if m.ID == "" {
		m.ID = wire.NewMessageID()
	}
	if m.TS == 0 {
		m.TS = wire.MillisOf(time.Now())
	}
	m.Space = string(c.space)
	card := c.card()
	m.From = wire.EndpointRef{ID: c.me.String(), Name: card.Name, Role: card.Role}
	subject, err := c.subjectFor(m)
	if err != nil {
		return "", nil, err
	}
	data, err := wire.EncodeMessage(m, int(c.nc.MaxPayload()))
	if err != nil {
		return "", nil, err
	}
	return subject, data, nil
}

// subjectFor builds the subject of m's routing field, as the client itself.
func (c *Client) subjectFor(m *wire.CotalMessage) (string, error) {
	switch {
	case m.Channel != "":
		if err := wire.ValidateChannel(m.Channel); err != nil {
			return "", err
		}
		if c.grant != nil && !c.grant.CanPost(m.Channel) {
			return "", fmt.Errorf("%w: this credential may not post to %q (allow-publish %q)", ErrNotPermitted, m.Channel, c.grant.AllowPublish)
		}
		return c.space.ChatSubject(c.me, m.Channel)
	case m.To != "":
		to, err := wire.ParsePrincipal(m.To)
		if err != nil {
			return "", err
		}
		return c.space.DMSubject(to, c.me), nil
	case m.ToService != "":
		return c.space.AnycastSubject(m.ToService, c.me)
	}
	return "", &wire.ValidationError{Field: "routing", Rule: "one of channel, to and toService must be set"}
}

// publishError explains a failed JetStream publish: a permission violation the broker reported
// for subject becomes ErrNotPermitted instead of the timeout it otherwise looks like.
func (c *Client) publishError(op, subject string, err error) error {
	if refusal := c.takeRefusal(subject); refusal != nil {
		return fmt.Errorf("%s: %w: %v", op, ErrNotPermitted, refusal)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, jetstream.ErrNoStreamResponse) {
		return fmt.Errorf("%s on %s: no stream acknowledged it (is the space provisioned?): %w", op, subject, err)
	}
	return fmt.Errorf("%s on %s: %w", op, subject, err)
}
