package ledger_test

import (
	"errors"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/meshtest"
)

// TestSharedPlane: the auth services of a cluster's authority nodes hold the plane together
// under one name; another name is refused while they hold it, and when the holder releases it a
// co-holder claims it at its next refresh.
func TestSharedPlane(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	l := m.Ledger("")
	const holder = "auth-service:main:cluster:team"
	first, err := l.SharePlane(ctx, holder, func(error) { t.Error("the first co-holder lost the plane") })
	if err != nil {
		t.Fatal(err)
	}
	lost := make(chan error, 1)
	second, err := l.SharePlane(ctx, holder, func(err error) { lost <- err })
	if err != nil {
		t.Fatalf("a second node of the cluster: %v", err)
	}
	if _, err := l.HoldPlane(ctx, "auth-service:main:4242", func(error) {}); !errors.Is(err, authstore.ErrPlaneHeld) {
		t.Fatalf("a lone auth service while the cluster holds the plane: %v", err)
	}
	if _, err := l.SharePlane(ctx, "auth-service:main:cluster:other", func(error) {}); !errors.Is(err, authstore.ErrPlaneHeld) {
		t.Fatalf("another cluster's auth service: %v", err)
	}
	if !first.Holding() || second.Holding() {
		t.Fatalf("holding: first %v, second %v; want the first only", first.Holding(), second.Holding())
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 30*time.Second, "the co-holder claiming the released plane", second.Holding)
	select {
	case err := <-lost:
		t.Fatalf("the co-holder lost the plane: %v", err)
	default:
	}
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
