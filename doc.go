// Package cotal is the Go SDK of Cotal: an agent (or any program) joins a space on a NATS
// broker, sees who is present, and reaches its peers by channel (multicast), by direct message
// (unicast) and by role (anycast), with the guarantees SPEC.md states.
//
//	c, err := cotal.Connect(ctx, "nats://127.0.0.1:4222",
//		cotal.WithCreds(".cotal/creds/main/alice.creds"),
//		cotal.WithHandler(func(ctx context.Context, d *cotal.Delivery) error {
//			fmt.Println(d.Kind, d.Sender, d.Message.Parts[0].Text)
//			return nil // acknowledge: the message was surfaced
//		}),
//		cotal.WithJoin("team.backend"))
//	if err != nil { ... }
//	defer c.Close(ctx)
//	c.Post(ctx, "team.backend", []wire.Part{wire.TextPart("hello")})
//
// The credential decides who the client is: Connect adopts the principal, space, lifecycle and
// role the creds file names, and sets the reply-inbox prefix its grant allows before it sends
// anything. Every send goes through JetStream with Nats-Msg-Id set to the message id; every
// delivery goes through wire.Guard before the handler sees it, and a durable delivery is
// acknowledged only after the handler returns nil. A malformed or forged delivery is terminated
// with its reason and never redelivered.
//
// The handler runs one delivery at a time and must not call Join or Leave itself (they surface
// history through the same handler); start them from another goroutine.
package cotal
