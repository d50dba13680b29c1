package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	cotal "github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/endpoint"
	"github.com/gocotal/cotal/internal/journal"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/runhost"
	"github.com/gocotal/cotal/lang"
	"github.com/gocotal/cotal/wire"
)

// The workflow-run family (SPEC §14.3): the manager hosts runs' drivers (package runhost) and
// serves their operator surface. A manager with no run host refuses them as unimplemented.

// DetailLangProblem is the detail kind of each language problem a refused program carries.
const DetailLangProblem = "ai.cotal.lang.problem"

// RunStartArgs are run-start's args: the program's source, and the file it came from (which
// only labels diagnostics).
type RunStartArgs struct {
	Source  string `json:"source"`
	File    string `json:"file,omitempty"`
	Timeout string `json:"timeout,omitempty"`
}

// RunIDArgs name a run (run-resume, run-status).
type RunIDArgs struct {
	RunID    string `json:"runId"`
	Endpoint string `json:"endpoint,omitempty"`
	Timeout  string `json:"timeout,omitempty"`
}

// RunAnswerArgs answer a run's open checkpoint at StepKey, as the journal prints it.
type RunAnswerArgs struct {
	RunID    string          `json:"runId"`
	Endpoint string          `json:"endpoint,omitempty"`
	StepKey  string          `json:"stepKey"`
	Value    json.RawMessage `json:"value,omitempty"`
	Artifact string          `json:"artifact,omitempty"`
}

// RunAnswerReply is run-answer's reply: the checkpoint's token, the answer's id, and the
// settle it asks for.
type RunAnswerReply struct {
	Token    string         `json:"token"`
	AnswerID string         `json:"answerId"`
	Settle   map[string]any `json:"settle"`
}

func (svc *Service) workflows() (*runhost.Host, *wire.EndpointError) {
	if svc.cfg.Workflows == nil {
		return nil, notExecuted(wire.CodeUnimplemented, "this manager hosts no workflow runs")
	}
	return svc.cfg.Workflows, nil
}

// runner checks that the caller may start, resume and answer runs: the operator's instrument,
// or a caller whose own credential carries the run capability. An agent's baseline self-mode
// answer row reaches this door too; this manager relays no question to an agent yet, so such a
// caller answers nothing.
func (svc *Service) runner(ctx context.Context, caller wire.Lifecycle) *wire.EndpointError {
	_, refusal := svc.runnerGrant(ctx, caller)
	return refusal
}

// runnerGrant is runner, answering the caller's own grant too: nil for the operator's
// instrument, which holds every channel.
func (svc *Service) runnerGrant(ctx context.Context, caller wire.Lifecycle) (*cotal.Grant, *wire.EndpointError) {
	if svc.cfg.HostLaunch(ctx, caller) {
		return nil, nil
	}
	if svc.cfg.CallerGrant != nil {
		if g, err := svc.cfg.CallerGrant(ctx, caller); err == nil && slices.Contains(g.Capabilities, authority.CapabilityRun) {
			return g, nil
		}
	}
	return nil, notExecuted(wire.CodePermissionDenied, "%s holds no run capability: it cannot start, resume or answer a workflow run", caller.Principal)
}

// admission is what a run caller starts is admitted under (SPEC §14.8): every channel for the
// operator's instrument (g nil); for a caller holding the run capability, the channels its own
// credential g may post to and read, which this manager vouches for.
func (svc *Service) admission(caller wire.Lifecycle, g *cotal.Grant) (runhost.Admit, error) {
	a := runhost.OperatorAdmit(caller, "started by the operator's instrument")
	if g == nil {
		return a, nil
	}
	ceiling, err := meshwire.GrantCeiling(svc.cfg.Space, caller.Principal, g.AllowPublish, g.AllowSubscribe)
	if err != nil {
		return runhost.Admit{}, err
	}
	a.Caller.Generation, a.Ceiling = g.Generation, ceiling
	a.Provenance.By = string(wire.ManagerEndpoint) + "/" + string(svc.cfg.Instance)
	a.Provenance.Reason = "the run capability and the channels of the caller's own credential"
	return a, nil
}

func (svc *Service) runStart(ctx context.Context, req *endpoint.Request) (any, error) {
	h, refusal := svc.workflows()
	var grant *cotal.Grant
	if refusal == nil {
		grant, refusal = svc.runnerGrant(ctx, req.Caller())
	}
	if refusal != nil {
		return nil, refusal
	}
	admit, err := svc.admission(req.Caller(), grant)
	if err != nil {
		return nil, notExecuted(wire.CodePermissionDenied, "the caller's channels: %v", err)
	}
	var args RunStartArgs
	if err := json.Unmarshal(req.Args(), &args); err != nil {
		return nil, notExecuted(wire.CodeBadRequest, "args: %v", err)
	}
	if args.Timeout != "" {
		return nil, notExecuted(wire.CodeUnimplemented, "this manager takes no default checkpoint timeout: give each checkpoint its own")
	}
	runID, err := h.Start(ctx, args.Source, admit)
	if refused, ok := errors.AsType[*lang.RefusedError](err); ok {
		return nil, programRefusal(args.File, refused.Report)
	}
	if err != nil {
		return nil, wire.NewEndpointError(wire.CodeInternal, wire.OutcomeUnknown, "start the run: %v", err)
	}
	return map[string]string{"runId": runID}, nil
}

// programRefusal is a refused program's bad-request: one detail per problem.
func programRefusal(file string, r *lang.Report) *wire.EndpointError {
	e := notExecuted(wire.CodeBadRequest, "the program does not validate (%d problems)", len(r.Diagnostics))
	for _, d := range r.Diagnostics {
		where, _ := json.Marshal(map[string]any{"file": file, "line": d.Line, "column": d.Column})
		code, _ := json.Marshal(d.Code)
		cause, _ := json.Marshal(d.Message)
		e.Details = append(e.Details, wire.ErrorDetail{Kind: DetailLangProblem, Extra: map[string]json.RawMessage{"code": code, "where": where, "cause": cause}})
	}
	return e
}

func (svc *Service) runResume(ctx context.Context, req *endpoint.Request) (any, error) {
	h, refusal := svc.workflows()
	if refusal == nil {
		refusal = svc.runner(ctx, req.Caller())
	}
	if refusal != nil {
		return nil, refusal
	}
	var args RunIDArgs
	if err := json.Unmarshal(req.Args(), &args); err != nil {
		return nil, notExecuted(wire.CodeBadRequest, "args: %v", err)
	}
	switch err := h.Resume(ctx, args.RunID, ""); {
	case errors.Is(err, runhost.ErrNoRun):
		return nil, notExecuted(wire.CodeNotFound, "%v; a run that was never started cannot be resumed", err)
	case errors.Is(err, runhost.ErrRunning):
		return nil, notExecuted(wire.CodeConflict, "%v", err)
	case errors.Is(err, runhost.ErrEnded), errors.Is(err, journal.ErrBroken):
		return nil, notExecuted(wire.CodeFailedPrecondition, "%v", err)
	case err != nil:
		if _, refused := errors.AsType[*lang.Fault](err); refused { // a journal a resume refuses (L5011, L5024)
			return nil, notExecuted(wire.CodeFailedPrecondition, "%v", err)
		}
		return nil, wire.NewEndpointError(wire.CodeInternal, wire.OutcomeUnknown, "resume run %s: %v", args.RunID, err)
	}
	return map[string]string{"runId": args.RunID}, nil
}

func (svc *Service) runAnswer(ctx context.Context, req *endpoint.Request) (any, error) {
	h, refusal := svc.workflows()
	if refusal != nil {
		return nil, refusal
	}
	var args RunAnswerArgs
	if err := json.Unmarshal(req.Args(), &args); err != nil {
		return nil, notExecuted(wire.CodeBadRequest, "args: %v", err)
	}
	// The agent an ask addresses answers it with no run capability: the ask is its turn.
	if seat, _ := h.Addressee(args.RunID, args.StepKey); seat == "" || seat != req.Caller().Principal.String() {
		if refusal := svc.runner(ctx, req.Caller()); refusal != nil {
			return nil, refusal
		}
	}
	if refusal := svc.otherEndpoint(args.Endpoint); refusal != nil {
		return nil, refusal
	}
	if args.Artifact != "" {
		return nil, notExecuted(wire.CodeUnimplemented, "this manager records no answer artifact")
	}
	value := args.Value
	if len(value) == 0 {
		value = json.RawMessage("null")
	}
	// The answerer is the caller as the broker authenticated it: a request names no one else.
	a, err := h.Answer(ctx, args.RunID, args.StepKey, value, req.Caller().Principal.String())
	switch {
	case errors.Is(err, runhost.ErrNotWaiting):
		return nil, notExecuted(wire.CodeNotFound, "%v", err)
	case errors.Is(err, runhost.ErrBadAnswer):
		return nil, notExecuted(wire.CodeBadRequest, "%v", err)
	case err != nil:
		return nil, wire.NewEndpointError(wire.CodeInternal, wire.OutcomeUnknown, "answer run %s: %v", args.RunID, err)
	}
	return RunAnswerReply{Token: a.Token, AnswerID: a.AnswerID, Settle: map[string]any{"outcome": "resolved", "step": args.StepKey, "answerId": a.AnswerID}}, nil
}

// otherEndpoint refuses a run read or answer addressed to another endpoint's runs.
func (svc *Service) otherEndpoint(name string) *wire.EndpointError {
	if name != "" && name != string(wire.ManagerEndpoint) {
		return notExecuted(wire.CodeNotFound, "this manager hosts the runs of endpoint %s, not %s", wire.ManagerEndpoint, name)
	}
	return nil
}

func (svc *Service) runStatus(ctx context.Context, req *endpoint.Request) (any, error) {
	h, refusal := svc.workflows()
	if refusal != nil {
		return nil, refusal
	}
	var args RunIDArgs
	if err := json.Unmarshal(req.Args(), &args); err != nil {
		return nil, notExecuted(wire.CodeBadRequest, "args: %v", err)
	}
	if refusal := svc.otherEndpoint(args.Endpoint); refusal != nil {
		return nil, refusal
	}
	v, err := h.View(ctx, args.RunID)
	switch {
	case errors.Is(err, runhost.ErrNoRun):
		return nil, notExecuted(wire.CodeNotFound, "%v", err)
	case errors.Is(err, journal.ErrBroken):
		return nil, wire.NewEndpointError(wire.CodeFailedPrecondition, wire.OutcomeExecuted, "%v", err)
	case err != nil:
		return nil, wire.NewEndpointError(wire.CodeInternal, wire.OutcomeUnknown, "read run %s: %v", args.RunID, err)
	}
	return v, nil
}

func (svc *Service) runPs(ctx context.Context, req *endpoint.Request) (any, error) {
	h, refusal := svc.workflows()
	if refusal != nil {
		return nil, refusal
	}
	var args struct {
		Endpoint string `json:"endpoint,omitempty"`
	}
	if err := json.Unmarshal(req.Args(), &args); err != nil {
		return nil, notExecuted(wire.CodeBadRequest, "args: %v", err)
	}
	if args.Endpoint != "" && args.Endpoint != string(wire.ManagerEndpoint) {
		return []runhost.Row{}, nil
	}
	rows, err := h.List(ctx)
	if err != nil {
		return nil, wire.NewEndpointError(wire.CodeInternal, wire.OutcomeUnknown, "list the runs: %v", fmt.Sprint(err))
	}
	return rows, nil
}
