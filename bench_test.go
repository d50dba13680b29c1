package cotal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// Benchmarks of the Cotal paths next to raw nats.go doing the same transport work on the same
// broker, under the same credentials: each pair's msgs/s ratio is what Cotal costs (issue 8).

// counter counts surfaced deliveries and signals when it reaches its target.
type counter struct {
	n, want atomic.Int64
	done    chan struct{}
}

func newCounter() *counter { return &counter{done: make(chan struct{}, 1)} }

func (c *counter) expect(n int) {
	c.n.Store(0)
	c.want.Store(int64(n))
	select {
	case <-c.done:
	default:
	}
}

func (c *counter) add() {
	if c.n.Add(1) == c.want.Load() {
		c.done <- struct{}{}
	}
}

func (c *counter) wait(b *testing.B) {
	b.Helper()
	select {
	case <-c.done:
	case <-time.After(60 * time.Second):
		b.Fatalf("%d of %d messages arrived", c.n.Load(), c.want.Load())
	}
}

func benchText(size int) []wire.Part { return []wire.Part{wire.TextPart(strings.Repeat("x", size))} }

// BenchmarkMulticast: one publisher to one subscriber on a channel, through the SDK (message
// built and checked, subject from the grant, stored in CHAT with its id for de-duplication,
// guard and de-duplication on receive) and as raw JetStream publishes of the same bytes, with the
// same Nats-Msg-Id header, on the same subject.
func BenchmarkMulticast(b *testing.B) {
	for _, size := range []int{128, 4096} {
		m := meshtest.Start(b)
		ch := []string{"general"}
		pubCred := m.AgentCred(b, mesh.MintRequest{Name: "alice", AllowPublish: ch, Subscribe: ch})
		subCred := m.AgentCred(b, mesh.MintRequest{Name: "bob", Subscribe: ch})
		got := newCounter()
		alice := connectBench(b, m, pubCred.Creds)
		bob := connectBench(b, m, subCred.Creds, cotal.WithJoin("general"), cotal.WithHandler(func(context.Context, *cotal.Delivery) error {
			got.add()
			return nil
		}))
		_ = bob
		b.Run(fmt.Sprintf("cotal/%dB", size), func(b *testing.B) {
			got.expect(b.N)
			parts := benchText(size)
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := alice.Post(b.Context(), "general", parts); err != nil {
					b.Fatal(err)
				}
			}
			got.wait(b)
		})
		b.Run(fmt.Sprintf("raw/%dB", size), func(b *testing.B) {
			pub, err := mesh.Connect(b.Context(), m.URL(), pubCred)
			if err != nil {
				b.Fatal(err)
			}
			defer pub.Close()
			pjs, err := jetstream.New(pub)
			if err != nil {
				b.Fatal(err)
			}
			sub, err := mesh.Connect(b.Context(), m.URL(), subCred)
			if err != nil {
				b.Fatal(err)
			}
			defer sub.Close()
			raw := newCounter()
			filter, _ := m.Space.ChatFilter("general")
			s, err := sub.Subscribe(filter, func(*nats.Msg) { raw.add() })
			if err != nil {
				b.Fatal(err)
			}
			defer s.Unsubscribe()
			if err := s.SetPendingLimits(-1, -1); err != nil {
				b.Fatal(err)
			}
			if err := sub.Flush(); err != nil {
				b.Fatal(err)
			}
			subject, _ := m.Space.ChatSubject(pubCred.Principal, "general")
			body := sampleMessage(b, pubCred.Principal, size)
			raw.expect(b.N)
			b.SetBytes(int64(size))
			i := 0
			for b.Loop() {
				i++
				if _, err := pjs.Publish(b.Context(), subject, body, jetstream.WithMsgID(fmt.Sprintf("raw-%d-%d", size, i))); err != nil {
					b.Fatal(err)
				}
			}
			raw.wait(b)
		})
	}
}

// BenchmarkDurableDM: a direct message stored in JetStream and consumed through the recipient's
// bound dm_ durable with an ack, through the SDK and as raw JetStream publish, pull and ack on the
// same stream and durable.
func BenchmarkDurableDM(b *testing.B) {
	m := meshtest.Start(b)
	aliceCred := m.AgentCred(b, mesh.MintRequest{Name: "alice"})
	bobCred := m.AgentCred(b, mesh.MintRequest{Name: "bob"})
	got := newCounter()
	alice := connectBench(b, m, aliceCred.Creds)
	bobLife := wire.Lifecycle{Principal: bobCred.Principal, UID: bobCred.LifecycleUID}
	b.Run("cotal", func(b *testing.B) {
		bob := connectBench(b, m, bobCred.Creds, cotal.WithHandler(func(context.Context, *cotal.Delivery) error {
			got.add()
			return nil
		}))
		got.expect(b.N)
		parts := benchText(128)
		for b.Loop() {
			if _, err := alice.DirectMessage(b.Context(), bobCred.Principal, parts); err != nil {
				b.Fatal(err)
			}
		}
		got.wait(b)
		_ = bob.Close(b.Context())
	})
	b.Run("raw", func(b *testing.B) {
		pub, err := mesh.Connect(b.Context(), m.URL(), aliceCred)
		if err != nil {
			b.Fatal(err)
		}
		defer pub.Close()
		pjs, _ := jetstream.New(pub)
		sub, err := mesh.Connect(b.Context(), m.URL(), bobCred)
		if err != nil {
			b.Fatal(err)
		}
		defer sub.Close()
		sjs, _ := jetstream.New(sub)
		cons, err := sjs.Consumer(b.Context(), m.Space.DMStream(), wire.DMDurable(bobLife))
		if err != nil {
			b.Fatal(err)
		}
		raw := newCounter()
		cc, err := cons.Consume(func(msg jetstream.Msg) {
			_ = msg.Ack()
			raw.add()
		})
		if err != nil {
			b.Fatal(err)
		}
		defer cc.Stop()
		subject := m.Space.DMSubject(bobCred.Principal, aliceCred.Principal)
		body := sampleMessage(b, aliceCred.Principal, 128)
		raw.expect(b.N)
		for b.Loop() {
			if _, err := pjs.Publish(b.Context(), subject, body); err != nil {
				b.Fatal(err)
			}
		}
		raw.wait(b)
	})
}

// BenchmarkIssueAgent: agent credentials issued per second, each with a fresh lifecycle, its
// ledger row and its JWT.
func BenchmarkIssueAgent(b *testing.B) {
	m := meshtest.Start(b)
	i := 0
	for b.Loop() {
		i++
		if _, err := m.Authority().IssueAgent(b.Context(), m.URL(), mesh.MintRequest{Space: m.Space, Name: fmt.Sprintf("a%d", i)}); err != nil {
			b.Fatal(err)
		}
	}
}

func connectBench(b *testing.B, m *meshtest.Mesh, creds []byte, opts ...cotal.Option) *cotal.Client {
	b.Helper()
	c, err := cotal.Connect(b.Context(), m.URL(), append([]cotal.Option{cotal.WithCredsData(creds)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Close(ctx) // the benchmark is over
	})
	return c
}

// sampleMessage is a valid message of the sender with a text part of size bytes, as raw
// publishers send it. Raw subscribers do not de-duplicate, so one body serves every publish.
func sampleMessage(b *testing.B, from wire.Principal, size int) []byte {
	b.Helper()
	msg := wire.CotalMessage{
		ID: "bench", TS: wire.MillisOf(time.Now()), Space: "main", Channel: "general",
		From:  wire.EndpointRef{ID: from.String(), Name: from.Actor()},
		Parts: benchText(size),
	}
	raw, err := json.Marshal(msg)
	if err != nil {
		b.Fatal(err)
	}
	return raw
}
