package failover

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

func TestDoGoesOnPastAnEndpointThatDoesNotAnswer(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer up.Close()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	downURL := down.URL
	down.Close()
	e := New(downURL, "", up.URL+"/", downURL)
	if got := e.URLs(); !reflect.DeepEqual(got, []string{downURL, up.URL}) {
		t.Fatalf("URLs = %v, want each once, none empty, no trailing slash", got)
	}
	var tried []string
	get := func(ctx context.Context, u string) error {
		tried = append(tried, u)
		res, err := http.Get(u)
		if err != nil {
			return err
		}
		return res.Body.Close()
	}
	if err := e.Do(context.Background(), get); err != nil {
		t.Fatal(err)
	}
	if want := []string{downURL, up.URL}; !reflect.DeepEqual(tried, want) {
		t.Fatalf("tried %v, want %v", tried, want)
	}
	if e.First() != up.URL {
		t.Fatalf("First = %s after the second answered, want it", e.First())
	}
}

func TestDoStopsAtAnAnswer(t *testing.T) {
	refused := errors.New("denied")
	e := New("http://a", "http://b")
	calls := 0
	err := e.Do(context.Background(), func(context.Context, string) error { calls++; return refused })
	if !errors.Is(err, refused) || calls != 1 {
		t.Fatalf("Do = %v after %d calls, want the refusal after one", err, calls)
	}
	calls = 0
	err = e.Do(context.Background(), func(context.Context, string) error {
		calls++
		return fmt.Errorf("HTTP 503: %w", ErrUnanswered)
	})
	if !errors.Is(err, ErrUnanswered) || calls != 2 {
		t.Fatalf("Do = %v after %d calls, want both tried", err, calls)
	}
	if err := New().Do(context.Background(), func(context.Context, string) error { return nil }); err == nil {
		t.Fatal("Do with no endpoint succeeded")
	}
}

func TestSplit(t *testing.T) {
	if got := Split(" http://a , ,http://b"); !reflect.DeepEqual(got, []string{"http://a", "http://b"}) {
		t.Fatalf("Split = %v", got)
	}
}
