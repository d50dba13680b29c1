package runhost

import (
	"context"
	"fmt"

	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/lang"
)

// ask performs an ask step: the agent takes a turn that asks for a value, answers the step with
// a record (run-answer, as a person answers a checkpoint) and yields; the record is checked
// against the step's schema, and a reply that does not conform, or a yield with no answer,
// costs one of the step's attempts. Each attempt is its own turn and its own answer token,
// derived from the step's request id, so a recovery takes back the attempt it was on and reads
// an answer given while the host was down.
func (m *meshHandler) ask(ctx context.Context, seats Seats, req *lang.Request) (*lang.Outcome, error) {
	schema, err := lang.ReadAskSchema(req)
	if err != nil {
		return nil, err
	}
	s, err := m.runSeat(req, req.Args[0])
	if err != nil {
		return nil, err
	}
	rawSchema := lang.JSON(req.Option("schema"))
	for attempt := 1; ; attempt++ {
		token, err := meshwire.DerivedID([]any{req.RequestID, "ask", attempt})
		if err != nil {
			return nil, err
		}
		a, err := m.askAttempt(ctx, seats, req, s, token, &TurnAsk{Schema: rawSchema, Attempt: attempt, Attempts: schema.Attempts})
		if err != nil {
			return nil, err
		}
		if a != nil {
			if v, err := lang.ParseJSON(a.Value); err == nil && schema.Conforms(v) {
				external := lang.NewRecord()
				external.Set("answerId", a.AnswerID)
				external.Set("by", a.By)
				external.Set("attempt", float64(attempt))
				return &lang.Outcome{Result: v, External: external}, nil
			}
		}
		if attempt >= schema.Attempts {
			return nil, schema.Exhausted(req.Key, attempt)
		}
	}
}

// askAttempt is one attempt of an ask: the answer recorded under token, after the seat's turn
// when none was recorded yet; nil when the seat yielded without answering.
func (m *meshHandler) askAttempt(ctx context.Context, seats Seats, req *lang.Request, s seat, token string, ask *TurnAsk) (*meshwire.Answer, error) {
	_, closeOpen := m.r.openFor(req.Key, openPoint{token: token, prompt: fmt.Sprintf("ask %s for %s", s.agent, ask.Schema), seat: s.agent.String()})
	defer closeOpen()
	a, err := m.h.readAnswer(ctx, m.r.mediator, token)
	if err != nil || a != nil {
		return a, err
	}
	if _, err := m.seatTurn(ctx, seats, req, s, token, ask); err != nil {
		return nil, err
	}
	return m.h.readAnswer(ctx, m.r.mediator, token)
}
