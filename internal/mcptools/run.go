package mcptools

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/runhost"
	"github.com/gocotal/cotal/lang"
)

// runActions are what cotal_run does.
var runActions = []string{"start", "status", "ps", "answer", "resume"}

// runArgs are cotal_run's arguments.
type runArgs struct {
	Action  string `json:"action" jsonschema:"start a program, read one run's status and journal, list the runs, answer a run's open checkpoint, or resume a held run"`
	Program string `json:"program,omitempty" jsonschema:"start: the Cotal Lang program's source"`
	RunID   string `json:"runId,omitempty" jsonschema:"status, answer, resume: the run's id"`
	Step    string `json:"step,omitempty" jsonschema:"answer: the checkpoint's step key, as status prints it (e.g. /checkpoint:approve#0)"`
	Value   any    `json:"value,omitempty" jsonschema:"answer: the answer, any JSON value"`
}

// run is cotal_run: the manager's workflow-run family, for a credential holding the run
// capability.
func (t *Tools) run(ctx context.Context, in runArgs) (*mcp.CallToolResult, error) {
	m, err := t.manager()
	if err != nil {
		return nil, err
	}
	switch in.Action {
	case "start":
		if strings.TrimSpace(in.Program) == "" {
			return nil, errors.New("start needs the program's source")
		}
		if r := lang.Check(in.Program); !r.Accepted {
			return nil, &lang.RefusedError{Report: r}
		}
		id, err := m.RunStart(ctx, in.Program, "")
		if err != nil {
			return nil, err
		}
		return text("started run %s; cotal_run status with runId %s shows its steps", id, id), nil
	case "status":
		var v runhost.View
		if err := m.RunStatus(ctx, in.RunID, &v); err != nil {
			return nil, err
		}
		return text("%s", runView(&v)), nil
	case "ps":
		var rows []runhost.Row
		if err := m.RunPs(ctx, &rows); err != nil {
			return nil, err
		}
		if len(rows) == 0 {
			return text("no workflow runs"), nil
		}
		var b strings.Builder
		for _, r := range rows {
			fmt.Fprintf(&b, "%s %s\n", r.RunID, r.State)
		}
		return text("%s", b.String()), nil
	case "answer":
		value, err := json.Marshal(in.Value) // an omitted value is null
		if err != nil {
			return nil, err
		}
		a, err := m.RunAnswer(ctx, in.RunID, in.Step, value)
		if err != nil {
			return nil, err
		}
		return text("answered %s of run %s (answer %s)", in.Step, in.RunID, a.AnswerID), nil
	case "resume":
		if err := m.RunResume(ctx, in.RunID); err != nil {
			return nil, err
		}
		return text("resumed run %s", in.RunID), nil
	}
	return nil, fmt.Errorf("action %q: must be one of %s", in.Action, strings.Join(runActions, ", "))
}

// runView renders a run's journal for an agent: its state, then a line per step record, an open
// checkpoint with its question.
func runView(v *runhost.View) string {
	var b strings.Builder
	var st struct {
		State string `json:"state"`
	}
	_ = json.Unmarshal(v.Status, &st)
	fmt.Fprintf(&b, "run %s: %s\n", v.RunID, cmp.Or(st.State, "no status"))
	for _, r := range v.Journal {
		if r.Kind != "step" {
			continue
		}
		fmt.Fprintf(&b, "%s %s", r.Step, r.Outcome)
		if r.Asks != "" {
			fmt.Fprintf(&b, " asks %q", r.Asks)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// yieldArgs are cotal_yield's arguments.
type yieldArgs struct {
	Status string `json:"status" jsonschema:"how your turn ended: done, blocked (you cannot go on without something), or handoff (another agent should take it)"`
	To     string `json:"to,omitempty" jsonschema:"handoff: the agent to hand off to"`
	Note   string `json:"note,omitempty" jsonschema:"a short line for the workflow: what you did, or what blocks you"`
	GoalID string `json:"goalId,omitempty" jsonschema:"the turn you yield; your oldest pending turn when omitted"`
	Value  any    `json:"value,omitempty" jsonschema:"when the turn asks for a value (its payload carries ask): the record you answer with, shaped as its schema says"`
}

// yieldStatuses are how a turn ends.
var yieldStatuses = []string{"done", "blocked", "handoff"}

// yield is cotal_yield: the agent ends the turn a workflow run asked of it.
func (t *Tools) yield(ctx context.Context, in yieldArgs) (*mcp.CallToolResult, error) {
	m, err := t.manager()
	if err != nil {
		return nil, err
	}
	turns, err := m.TurnPending(ctx)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(turns, func(t manager.PendingTurn) bool { return in.GoalID == "" || t.GoalID == in.GoalID })
	switch {
	case len(turns) == 0:
		return nil, errors.New("no workflow run has asked you for a turn")
	case i < 0:
		return nil, fmt.Errorf("you hold no pending turn %s: cotal_yield takes one of your pending turns", in.GoalID)
	}
	var value json.RawMessage
	if in.Value != nil {
		if value, err = json.Marshal(in.Value); err != nil {
			return nil, err
		}
	}
	turn := turns[i]
	if err := m.AnswerAndYield(ctx, turn, manager.TurnYieldArgs{Status: in.Status, To: in.To, Note: in.Note}, value); err != nil {
		return nil, err
	}
	return text("yielded turn %s: %s", turn.GoalID, in.Status), nil
}
