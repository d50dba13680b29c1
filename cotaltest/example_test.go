package cotaltest_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/cotaltest"
	"github.com/gocotal/cotal/wire"
)

// This example starts a mesh, issues two agents, and has alice send bob a direct message. In a
// test, cotaltest.StartMesh(t), m.Agent(t, ...) and bob.Connect(t, ...) do the same and clean up
// after the test.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := cotaltest.NewMesh(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	alice, err := m.Issue(ctx, "alice")
	if err != nil {
		log.Fatal(err)
	}
	bob, err := m.Issue(ctx, "bob")
	if err != nil {
		log.Fatal(err)
	}

	// bob's handler hands each delivery to the example.
	got := make(chan *cotal.Delivery, 1)
	bc, err := cotal.Connect(ctx, m.URL(), cotal.WithCredsData(bob.Creds),
		cotal.WithHandler(func(ctx context.Context, d *cotal.Delivery) error {
			select {
			case got <- d:
				return nil // acknowledged: the message was surfaced
			case <-ctx.Done():
				return ctx.Err()
			}
		}))
	if err != nil {
		log.Fatal(err)
	}
	defer bc.Close(ctx)
	ac, err := cotal.Connect(ctx, m.URL(), cotal.WithCredsData(alice.Creds))
	if err != nil {
		log.Fatal(err)
	}
	defer ac.Close(ctx)

	if _, err := ac.DirectMessage(ctx, bob.Principal, []wire.Part{wire.TextPart("hello bob")}); err != nil {
		log.Fatal(err)
	}
	select {
	case d := <-got:
		fmt.Printf("%s from %s: %s\n", d.Kind, d.Sender, d.Message.Parts[0].Text)
	case <-ctx.Done():
		log.Fatal("no direct message")
	}
	// Output: dm from local.alice: hello bob
}
