package agentlock

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal/wire"
)

func TestOneProcessPerIdentity(t *testing.T) {
	dir := t.TempDir()
	dave, err := wire.NewPrincipal("local", "dave")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	first, err := Acquire(ctx, dir, "main", dave, "cotal mcp", false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(ctx, dir, "main", dave, "cotal mcp", false)
	var held *HeldError
	if !errors.As(err, &held) || held.Holder.PID != os.Getpid() || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) || !strings.Contains(err.Error(), "--takeover") {
		t.Fatalf("a second holder = %v, want a refusal naming the first's pid", err)
	}
	// Another name, or the same name in another space, is another identity.
	bob, _ := wire.NewPrincipal("local", "bob")
	other, err := Acquire(ctx, dir, "main", bob, "cotal mcp", false)
	if err != nil {
		t.Fatalf("another name: %v", err)
	}
	other.Release()
	if l, err := Acquire(ctx, dir, "other", dave, "cotal mcp", false); err != nil {
		t.Fatalf("another space: %v", err)
	} else {
		l.Release()
	}

	takenBy := make(chan Holder, 1)
	first.Watch(func(by Holder) { takenBy <- by })
	second, err := Acquire(ctx, dir, "main", dave, "cotal agent", true)
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	select {
	case by := <-takenBy:
		if by.Command != "cotal agent" || by.PID != os.Getpid() {
			t.Errorf("taken over by %+v", by)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the holder was not told it was taken over")
	}
	first.Release() // after a takeover, a no-op
	if _, err := os.Stat(second.base + ".takeover"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the takeover notice outlived the takeover: %v", err)
	}
	// A holder that ends lets the identity go.
	second.Release()
	second.Release()
	third, err := Acquire(ctx, dir, "main", dave, "cotal mcp", false)
	if err != nil {
		t.Fatalf("after the holder ended: %v", err)
	}
	third.Release()
}

// TestTakeoverOfAHolderThatDoesNotLetGo: a holder that never watches keeps the identity, and the
// taker gives up naming it, leaving no notice behind.
func TestTakeoverOfAHolderThatDoesNotLetGo(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out TakeoverWait")
	}
	dir := t.TempDir()
	dave, _ := wire.NewPrincipal("local", "dave")
	first, err := Acquire(t.Context(), dir, "main", dave, "cotal mcp", false)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Release()
	if _, err := Acquire(t.Context(), dir, "main", dave, "cotal mcp", true); err == nil || !strings.Contains(err.Error(), "did not let go") {
		t.Fatalf("a takeover of a deaf holder = %v", err)
	}
	if _, err := os.Stat(first.base + ".takeover"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed takeover left its notice: %v", err)
	}
}
