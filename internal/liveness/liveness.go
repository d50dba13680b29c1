// Package liveness serves a daemon's liveness plane: it answers peers' probes of the plane with
// one verdict graded from the daemon's own state, so any peer can ask "is the delivery daemon
// alive? the manager?" without being granted a read of the lease that answers it.
package liveness

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// Grader returns the responder's verdict on its own plane and, when it has one, the token of the
// answering incarnation. A grader that cannot decide returns wire.ResponderUnknown.
type Grader func(ctx context.Context) (wire.ResponderState, string)

// gradeTimeout bounds one grading, so a stuck check answers unknown rather than nothing.
const gradeTimeout = time.Second

// Serve answers probes of plane in space on nc until the returned subscription is
// unsubscribed (or nc closes). It queue-subscribes the plane's serve filter, so several
// responders of one plane answer each probe once, and replies only when the reply subject lies
// under the request's own .reply. leaf: the credential's reply grant stops there, and anything
// else would let a caller aim the answer elsewhere. The lease row never crosses the wire.
func Serve(nc *nats.Conn, space wire.Space, plane wire.Plane, grade Grader, log *slog.Logger) (*nats.Subscription, error) {
	if _, err := wire.ParsePlane(string(plane)); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sub, err := nc.QueueSubscribe(meshwire.LivenessServeFilter(space, plane), string(plane), func(msg *nats.Msg) {
		if _, err := meshwire.ParseRailRequest(msg.Subject); err != nil || !meshwire.IsBoundReply(msg.Subject, msg.Reply) {
			log.Warn("liveness probe ignored", "subject", msg.Subject, "reply", msg.Reply)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), gradeTimeout)
		defer cancel()
		state, instance := grade(ctx)
		body, err := json.Marshal(wire.LivenessAnswer{Plane: plane, Responder: state, Instance: instance})
		if err != nil {
			log.Error("liveness answer", "err", err)
			return
		}
		if err := msg.Respond(body); err != nil {
			log.Warn("liveness answer", "reply", msg.Reply, "err", err)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("serve the %s liveness plane: %w", plane, err)
	}
	if err := nc.Flush(); err != nil {
		return nil, fmt.Errorf("serve the %s liveness plane: %w", plane, err)
	}
	return sub, nil
}
