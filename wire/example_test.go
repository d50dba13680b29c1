package wire_test

import (
	"errors"
	"fmt"

	"github.com/gocotal/cotal/wire"
)

func ExampleParseSubject() {
	p, err := wire.ParseSubject("cotal.main.chat.u_aaaaaaaaaaaaaaaaaaaaaaaaaa.alice.team.backend")
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Kind, p.Sender(), p.Rest)

	// The retired control rail has no sender and is never a delivery.
	_, err = wire.ParseSubject("cotal.main.ctl.manager.u_aaaaaaaaaaaaaaaaaaaaaaaaaa.alice")
	fmt.Println(errors.Is(err, wire.ErrInvalid))
	// Output:
	// chat u_aaaaaaaaaaaaaaaaaaaaaaaaaa.alice team.backend
	// true
}

func ExampleGuard() {
	subject := "cotal.main.chat.u_bbbbbbbbbbbbbbbbbbbbbbbbbb.bob.team.backend"
	forged := `{"id":"m1","ts":1710000000000,"space":"main",` +
		`"from":{"id":"u_aaaaaaaaaaaaaaaaaaaaaaaaaa.alice","name":"alice"},` +
		`"channel":"team.backend","parts":[{"kind":"text","text":"hi"}]}`
	_, err := wire.Guard(subject, []byte(forged))
	var rej *wire.RejectError
	if errors.As(err, &rej) {
		fmt.Println(rej.Reason)
	}
	// Output: sender-mismatch
}

func ExampleSpace_ChatSubject() {
	sp := wire.Space("main")
	alice, err := wire.ParsePrincipal("u_aaaaaaaaaaaaaaaaaaaaaaaaaa.alice")
	if err != nil {
		panic(err)
	}
	subj, err := sp.ChatSubject(alice, "team.backend")
	if err != nil {
		panic(err)
	}
	fmt.Println(subj)
	fmt.Println(sp.ChatStream(), sp.PresenceBucket())
	// Output:
	// cotal.main.chat.u_aaaaaaaaaaaaaaaaaaaaaaaaaa.alice.team.backend
	// CHAT_main cotal_presence_main
}
