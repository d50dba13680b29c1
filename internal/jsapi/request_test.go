package jsapi_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/broker/brokertest"
	"github.com/gocotal/cotal/internal/jsapi"
)

// TestRequestAsksAgainWhenUnanswered: a request a responder drops (as a cluster replica still
// catching up drops a Direct Get) is asked again, within the try's bound, rather than waited on
// for as long as the caller's context lasts.
func TestRequestAsksAgainWhenUnanswered(t *testing.T) {
	defer jsapi.SetRequestWait(200 * time.Millisecond)()
	nc, err := nats.Connect(brokertest.Start(t))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var asked atomic.Int32
	sub, err := nc.Subscribe("$JS.API.DIRECT.GET.S", func(m *nats.Msg) {
		if asked.Add(1) > 2 {
			_ = m.Respond([]byte("answer"))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	msg, err := jsapi.Request(t.Context(), nc, "$JS.API.DIRECT.GET.S", nil)
	if err != nil || string(msg.Data) != "answer" || asked.Load() != 3 {
		t.Fatalf("Request = %v, %v after %d tries; want the third try's answer", msg, err, asked.Load())
	}
}
