package cotal_test

import (
	"context"
	"fmt"
	"log"
	"slices"
	"time"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/cotaltest"
	"github.com/gocotal/cotal/wire"
)

// exampleMesh starts a throwaway mesh for an example and issues agents by name, each allowed to
// read and post on #general; the reviewer role goes to the agent named "worker".
func exampleMesh(ctx context.Context, names ...string) (*cotaltest.Mesh, map[string]*cotaltest.Agent) {
	m, err := cotaltest.NewMesh(ctx)
	if err != nil {
		log.Fatal(err)
	}
	agents := map[string]*cotaltest.Agent{}
	for _, name := range names {
		opts := []cotaltest.AgentOption{cotaltest.Channels("general")}
		if name == "worker" {
			opts = append(opts, cotaltest.Role("reviewer"))
		}
		if agents[name], err = m.Issue(ctx, name, opts...); err != nil {
			log.Fatal(err)
		}
	}
	return m, agents
}

// nextLive waits for the next delivery that is not a join's backfill.
func nextLive(ctx context.Context, r *cotaltest.Recorder) *cotal.Delivery {
	for ctx.Err() == nil {
		for _, d := range r.Deliveries() {
			if !d.Historical {
				return d
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	log.Fatal("no delivery: ", ctx.Err())
	return nil
}

// Connect joins the mesh as the credential's principal; the space, lifecycle and role come from
// the credential itself.
func ExampleConnect() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, agents := exampleMesh(ctx, "alice")
	defer m.Close()

	c, err := cotal.Connect(ctx, m.URL(), cotal.WithCredsData(agents["alice"].Creds))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	fmt.Println(c.Principal())
	// Output: local.alice
}

// Post multicasts to a channel: every current reader receives it, a durable channel's members
// even if they were away.
func ExampleClient_Post() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, agents := exampleMesh(ctx, "alice", "bob")
	defer m.Close()

	rec := cotaltest.NewRecorder()
	bob, err := cotal.Connect(ctx, m.URL(), cotal.WithCredsData(agents["bob"].Creds), cotal.WithJoin("general"), cotal.WithHandler(rec.Handle))
	if err != nil {
		log.Fatal(err)
	}
	defer bob.Close(ctx)
	alice, err := cotal.Connect(ctx, m.URL(), cotal.WithCredsData(agents["alice"].Creds))
	if err != nil {
		log.Fatal(err)
	}
	defer alice.Close(ctx)

	if _, err := alice.Post(ctx, "general", []wire.Part{wire.TextPart("hello, team")}); err != nil {
		log.Fatal(err)
	}
	d := nextLive(ctx, rec)
	fmt.Printf("#%s %s: %s\n", d.Channel, d.Sender, d.Message.Parts[0].Text)
	// Output: #general local.alice: hello, team
}

// DirectMessage is durable: it waits in the recipient's inbox until the recipient surfaced it.
func ExampleClient_DirectMessage() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, agents := exampleMesh(ctx, "alice", "bob")
	defer m.Close()

	alice, err := cotal.Connect(ctx, m.URL(), cotal.WithCredsData(agents["alice"].Creds))
	if err != nil {
		log.Fatal(err)
	}
	defer alice.Close(ctx)
	// bob is not connected yet: the message waits for him.
	if _, err := alice.DirectMessage(ctx, agents["bob"].Principal, []wire.Part{wire.TextPart("psst")}); err != nil {
		log.Fatal(err)
	}

	rec := cotaltest.NewRecorder()
	bob, err := cotal.Connect(ctx, m.URL(), cotal.WithCredsData(agents["bob"].Creds), cotal.WithHandler(rec.Handle))
	if err != nil {
		log.Fatal(err)
	}
	defer bob.Close(ctx)
	d := nextLive(ctx, rec)
	fmt.Printf("%s from %s: %s\n", d.Kind, d.Sender, d.Message.Parts[0].Text)
	// Output: dm from local.alice: psst
}

// Ask hands work to any one free member of a role.
func ExampleClient_Ask() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, agents := exampleMesh(ctx, "alice", "worker")
	defer m.Close()

	rec := cotaltest.NewRecorder()
	worker, err := cotal.Connect(ctx, m.URL(), cotal.WithCredsData(agents["worker"].Creds), cotal.WithHandler(rec.Handle))
	if err != nil {
		log.Fatal(err)
	}
	defer worker.Close(ctx)
	alice, err := cotal.Connect(ctx, m.URL(), cotal.WithCredsData(agents["alice"].Creds))
	if err != nil {
		log.Fatal(err)
	}
	defer alice.Close(ctx)

	if _, err := alice.Ask(ctx, "reviewer", []wire.Part{wire.TextPart("please review #12")}); err != nil {
		log.Fatal(err)
	}
	d := nextLive(ctx, rec)
	fmt.Printf("%s for %s from %s: %s\n", d.Kind, d.Message.ToService, d.Sender, d.Message.Parts[0].Text)
	// Output: anycast for reviewer from local.alice: please review #12
}

// Roster is the live presence of the space: who is there, and who went away.
func ExampleClient_Roster() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, agents := exampleMesh(ctx, "alice", "bob")
	defer m.Close()

	var clients []*cotal.Client
	for _, name := range []string{"alice", "bob"} {
		c, err := cotal.Connect(ctx, m.URL(), cotal.WithCredsData(agents[name].Creds))
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close(ctx)
		clients = append(clients, c)
	}
	roster, err := clients[0].Roster(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer roster.Stop()
	for {
		var online []string
		for _, p := range roster.Peers() {
			if p.Online {
				online = append(online, p.Key)
			}
		}
		slices.Sort(online)
		if len(online) == 2 {
			fmt.Println(online)
			break
		}
		select {
		case <-roster.Changes():
		case <-ctx.Done():
			log.Fatal(ctx.Err())
		}
	}
	// Output: [local.alice local.bob]
}
