package jsapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// requestPatience bounds how long Request asks again (about 1 s in all) for the JetStream API to
// answer.
var requestPatience = Patience{Waits: 6, Step: 50 * time.Millisecond}

// requestWait bounds one try of Request, as nats.go's JetStream client bounds its API calls.
var requestWait = 5 * time.Second

// errNoAnswer is a request that got no answer within requestWait: Answered asks again.
var errNoAnswer = errors.New("the JetStream API gave no answer")

// Request sends one JetStream API request on nc and returns its reply. The account's JetStream API
// is a service the broker imports from its system account, and the broker drops and re-adds that
// import while it applies new account claims (every revocation push is one): a request in that
// moment has no responders, so Request asks again, a few times within ctx, before it reports
// nats.ErrNoResponders. Each try waits requestWait at most: on a cluster a Direct Get can reach a
// replica that drops it unanswered (one still catching up), and a try that got no answer is made
// again, as one that found no responders is, rather than waited on for as long as ctx lasts.
func Request(ctx context.Context, nc *nats.Conn, subject string, body []byte) (*nats.Msg, error) {
	var msg *nats.Msg
	err := Answered(ctx, requestPatience, func() (err error) {
		tctx, cancel := context.WithTimeout(ctx, requestWait)
		defer cancel()
		msg, err = nc.RequestWithContext(tctx, subject, body)
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return fmt.Errorf("%w within %s", errNoAnswer, requestWait)
		}
		return err
	})
	return msg, err
}

// msgDeleteReply is the JetStream API's answer to a message delete.
type msgDeleteReply struct {
	Success bool                `json:"success"`
	Error   *jetstream.APIError `json:"error"`
}

// DeleteMsg asks the JetStream API on nc to delete the message at seq of stream, and checks its
// answer: a message the stream does not hold (any more) counts as deleted (MsgGone). Unlike
// nats.go's Stream.DeleteMsg, a refusal keeps its *jetstream.APIError for errors.As.
func DeleteMsg(ctx context.Context, nc *nats.Conn, stream string, seq uint64) error {
	req, _ := json.Marshal(map[string]uint64{"seq": seq}) // a map of numbers always encodes
	msg, err := Request(ctx, nc, MsgDelete+stream, req)
	if err != nil {
		return fmt.Errorf("delete message %d of %s: %w", seq, stream, err)
	}
	var rep msgDeleteReply
	switch err := json.Unmarshal(msg.Data, &rep); {
	case err != nil:
		return fmt.Errorf("delete message %d of %s: the broker's answer %q is not a JetStream API reply: %w", seq, stream, msg.Data, err)
	case rep.Error != nil && MsgGone(rep.Error):
		return nil
	case rep.Error != nil:
		return fmt.Errorf("delete message %d of %s: %w", seq, stream, rep.Error)
	case !rep.Success:
		return fmt.Errorf("delete message %d of %s: the broker answered %s without success", seq, stream, msg.Data)
	}
	return nil
}
