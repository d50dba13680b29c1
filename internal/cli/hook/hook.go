// Package hook implements `cotal hook`: the command a harness's hooks run at its turn boundaries,
// which tells the agent's `cotal mcp` what the harness is doing and hands the model what arrived
// between turns.
package hook

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/hooksock"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/wire"
)

// hookEvents names each event as the hook output of Claude Code and of Codex (which reads the
// same shapes) names it, for the events whose output hands the model context.
var hookEvents = map[string]string{manager.HookSessionStart: "SessionStart", manager.HookPrompt: "UserPromptSubmit", manager.HookToolDone: "PostToolUse"}

// maxInput bounds the hook input read from stdin.
const maxInput = 256 << 10

// NewCmdHook returns the `cotal hook` command.
func NewCmdHook(f *factory.Factory) *cobra.Command {
	var agent, space string
	cmd := &cobra.Command{
		Use:   "hook EVENT [PAYLOAD] --agent OWNER.ACTOR [--space S]",
		Short: "Tell an agent's cotal mcp what its harness is doing (run by the harness's hooks)",
		Long: "Run by a harness's hooks, with the hook's input on stdin: it tells the agent's `cotal mcp` (found\n" +
			"by its principal, on a socket of this user's alone) what the harness does, so the agent's\n" +
			"status follows it, and prints what arrived between turns for the model.\n\n" +
			"Events: session-start (idle, attention open), prompt (working; messages handed in), tool\n" +
			"(working, on the tool), tool-done (a DM, task or mention that came during the tool is handed\n" +
			"in), notification (waiting on its person), stop and session-end (idle), turn-end (what\n" +
			"should wake the agent is handed in and the turn goes on; idle when nothing is), wait (an\n" +
			"idle harness waits up to 8 s for what should wake the agent; the messages are handed in) and\n" +
			"idle-wait (its manager waits up to 8 s for what should wake the idle agent; it gets a line to\n" +
			"type into the agent's terminal, and nothing is handed in).\n\n" +
			"For session-start, prompt and tool-done it prints the hook output of Claude Code and Codex,\n" +
			"the messages as additionalContext; for turn-end, a Stop hook's block with the messages as\n" +
			"its reason; for wait and idle-wait, the messages or the line as text. It prints nothing\n" +
			"when nothing is handed in, and never fails the harness: an agent not running is a note on\n" +
			"stderr.\n\n" +
			"A harness that passes the hook's input as the last argument instead (Codex's notify program)\n" +
			"gives it as PAYLOAD, a JSON document; stdin is then not read.",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			event := args[0]
			if !slices.Contains(manager.HookEvents, event) {
				return &exit.UsageError{Err: fmt.Errorf("EVENT %q: must be one of %s", event, strings.Join(manager.HookEvents, ", "))}
			}
			p, err := wire.ParsePrincipal(agent)
			if err != nil {
				return &exit.UsageError{Err: fmt.Errorf("--agent: %w", err)}
			}
			sp, err := wire.ParseSpace(space)
			if err != nil {
				return &exit.UsageError{Err: fmt.Errorf("--space: %w", err)}
			}
			var input []byte
			if len(args) == 2 {
				if input = []byte(args[1]); len(input) > maxInput || !json.Valid(input) {
					return &exit.UsageError{Err: fmt.Errorf("PAYLOAD: must be a JSON document of at most %d bytes", maxInput)}
				}
			} else if input, err = io.ReadAll(io.LimitReader(f.IO.In, maxInput)); err != nil || !json.Valid(input) {
				input = nil // a harness without hook input, or one we cannot read, still has an event
			}
			return run(cmd.Context(), f, sp, p, hooksock.Request{Event: event, Payload: input})
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "the agent's principal, owner.actor (required)")
	cmd.Flags().StringVar(&space, "space", "main", "the agent's space")
	return cmd
}

func run(ctx context.Context, f *factory.Factory, sp wire.Space, p wire.Principal, req hooksock.Request) error {
	path, err := hooksock.Socket(sp, p)
	if err == nil {
		var reply *hooksock.Reply
		if reply, err = hooksock.Ask(ctx, path, req); err == nil {
			name, hands := hookEvents[req.Event]
			switch {
			case reply.Context == "":
			case hands:
				out, _ := json.Marshal(map[string]any{"hookSpecificOutput": map[string]string{ // strings always encode
					"hookEventName": name, "additionalContext": reply.Context}})
				fmt.Fprintln(f.IO.Out, string(out))
			case req.Event == manager.HookTurnEnd:
				// The harness does not stop: it goes on with the messages as its next input.
				out, _ := json.Marshal(map[string]string{"decision": "block", "reason": reply.Context})
				fmt.Fprintln(f.IO.Out, string(out))
			case req.Event == manager.HookWait || req.Event == manager.HookIdleWait:
				fmt.Fprint(f.IO.Out, reply.Context)
			}
			return nil
		}
	}
	fmt.Fprintf(f.IO.ErrOut, "cotal hook %s: %s's cotal mcp did not answer: %v\n", req.Event, p, err)
	return nil
}
