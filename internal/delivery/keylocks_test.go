package delivery

import (
	"context"
	"errors"
	"testing"
)

// TestKeyLocks: a held key makes a second locker wait (here, until its ctx ends), other keys
// are free meanwhile, and an unlocked key is free again and forgotten.
func TestKeyLocks(t *testing.T) {
	var k keyLocks
	unlock, err := k.lock(t.Context(), "team local.alice")
	if err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := k.lock(ended, "team local.alice"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a held key was locked again: %v", err)
	}
	other, err := k.lock(t.Context(), "ops local.alice")
	if err != nil {
		t.Fatalf("another key waited on a held one: %v", err)
	}
	other()
	unlock()
	again, err := k.lock(t.Context(), "team local.alice")
	if err != nil {
		t.Fatalf("an unlocked key stayed held: %v", err)
	}
	again()
	if n := len(k.locks); n != 0 {
		t.Errorf("%d locks left with no users", n)
	}
}
