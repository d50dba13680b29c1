package manager

import (
	"cmp"
	_ "embed" // the OpenCode plugin
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/wire"
)

// Harness names an LLM agent harness the supervisor knows how to start with the cotal MCP
// server configured.
type Harness string

// The harness presets.
const (
	HarnessClaude   Harness = "claude"   // Claude Code: --mcp-config <file>, its channel loaded
	HarnessCodex    Harness = "codex"    // Codex: -c mcp_servers.cotal.*, its hooks and notify
	HarnessOpenCode Harness = "opencode" // OpenCode: OPENCODE_CONFIG=<file>, with the cotal plugin
	// HarnessCotal is cotal's own small agent (`cotal agent --echo`): it joins as the spawn names
	// it and echoes direct messages, so a team can be tried with no LLM harness installed.
	HarnessCotal Harness = "cotal"
)

// Harnesses lists the presets.
var Harnesses = []Harness{HarnessClaude, HarnessCodex, HarnessOpenCode, HarnessCotal}

// takes returns an error when h cannot honour a model or a persona's instructions: an agent
// started without what its spawn asked for would be the wrong agent. Claude Code takes both;
// Codex and OpenCode take a model; cotal's agent runs no model and has no instructions to follow,
// so it takes no model and ignores a persona's instructions.
func (h Harness) takes(model, instructions string) error {
	switch {
	case model != "" && (h == "" || h == HarnessCotal):
		return &wire.ValidationError{Field: "model", Value: model, Rule: "needs an LLM harness (claude, codex or opencode)"}
	case instructions != "" && (h == "" || h == HarnessCodex || h == HarnessOpenCode):
		return &wire.ValidationError{Field: "instructions", Rule: fmt.Sprintf("are not passed to %s by this manager: give them in the harness's own configuration", cmp.Or(string(h), "a raw command"))}
	}
	return nil
}

// kicksOff returns an error unless h can be started with a kickoff message, which the three LLM
// harnesses take on their command line; cotal's agent runs no model to read one.
func (h Harness) kicksOff(kickoff string) error {
	if kickoff != "" && h != HarnessClaude && h != HarnessCodex && h != HarnessOpenCode {
		return &wire.ValidationError{Field: "prompt", Rule: fmt.Sprintf("(a kickoff message) needs an LLM harness (claude, codex or opencode); %s reads none", cmp.Or(string(h), "a raw command"))}
	}
	return nil
}

// kickoffArgs are the arguments, after every other, that start h's session with kickoff as its
// first message: Claude Code and Codex take it as their prompt operand (after "--", so a message
// that starts with a dash stays a message), OpenCode as --prompt.
func (h Harness) kickoffArgs(kickoff string) []string {
	switch {
	case kickoff == "":
		return nil
	case h == HarnessOpenCode:
		return []string{"--prompt", kickoff}
	}
	return []string{"--", kickoff}
}

// ResumeLast is the Resume that reopens a harness's latest session in the working directory.
const ResumeLast = "last"

// sessionID is the shape of a harness session id a spawn may name.
var sessionID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// resumes returns an error unless h can reopen the session resume names: Claude Code and
// OpenCode reopen their latest session (ResumeLast) or one by id.
func (h Harness) resumes(resume string) error {
	switch {
	case resume == "":
		return nil
	case h != HarnessClaude && h != HarnessOpenCode:
		return &wire.ValidationError{Field: "resume", Value: resume, Rule: fmt.Sprintf("is for claude or opencode; this manager does not reopen a session of %s", cmp.Or(string(h), "a raw command"))}
	case resume != ResumeLast && !sessionID.MatchString(resume):
		return &wire.ValidationError{Field: "resume", Value: resume, Rule: fmt.Sprintf("must be %q or a session id (1 to 128 of A-Z a-z 0-9 _ -)", ResumeLast)}
	}
	return nil
}

// resumeArgs are the arguments that make h reopen the session resume names.
func (h Harness) resumeArgs(resume string) []string {
	switch {
	case resume == "":
		return nil
	case resume == ResumeLast:
		return []string{"--continue"}
	case h == HarnessOpenCode:
		return []string{"--session", resume}
	}
	return []string{"--resume", resume}
}

func (h Harness) validate() error {
	if h == "" || slices.Contains(Harnesses, h) {
		return nil
	}
	return &wire.ValidationError{Field: "agent", Value: string(h), Rule: fmt.Sprintf("must be one of %q", Harnesses)}
}

// command returns the argv and extra environment that start harness h on the cotal MCP server
// of the launch material m in dir, followed by the spec's own arguments; spawnEnv is the spawn's
// own environment, which wins over the preset's.
func (h Harness) command(m Material, dir string, sp Spec) (argv, env []string, err error) {
	args, spawnEnv := sp.Command, sp.Env
	srv, ok := m.MCPServers["cotal"]
	if !ok {
		return nil, nil, errors.New("the supervisor has no `cotal mcp` command to configure")
	}
	switch h {
	case HarnessClaude:
		path := filepath.Join(dir, "mcp.json")
		raw, _ := json.MarshalIndent(map[string]any{"mcpServers": m.MCPServers}, "", "  ") // always encodes
		if err := atomicfile.Write(path, raw, 0o600); err != nil {
			return nil, nil, err
		}
		settings := filepath.Join(dir, "settings.json")
		raw, _ = json.MarshalIndent(claudeHooks(srv.Command, m.Space, m.Principal), "", "  ") // always encodes
		if err := atomicfile.Write(settings, raw, 0o600); err != nil {
			return nil, nil, err
		}
		argv = append([]string{"claude", "--mcp-config", path, "--settings", settings}, h.resumeArgs(sp.Resume)...)
		if sp.Model != "" {
			argv = append(argv, "--model", sp.Model)
		}
		if sp.Instructions != "" {
			argv = append(argv, "--append-system-prompt", sp.Instructions)
		}
		// The cotal server is loaded as a channel too, so a message that should wake the session
		// does (Claude Code 2.1.80 and later); COTAL_CHANNEL=0 in the spawn's environment leaves
		// it out, for an older Claude Code.
		if slices.Contains(spawnEnv, ClaudeChannelEnv+"=0") {
			return append(append(argv, args...), h.kickoffArgs(sp.Kickoff)...), nil, nil
		}
		argv = append(argv, "--dangerously-load-development-channels", "server:cotal")
		return append(append(argv, args...), h.kickoffArgs(sp.Kickoff)...), []string{ClaudeChannelEnv + "=1"}, nil
	case HarnessCodex:
		// Codex runs its notify program, the event's JSON as the last argument, when a turn
		// completes: the agent goes idle then without the model's help, whatever its version.
		notify := []string{srv.Command, "hook", HookStop, "--space", m.Space, "--agent", m.Principal}
		argv = []string{"codex"}
		if sp.Model != "" {
			argv = append(argv, "--model", sp.Model)
		}
		argv = append(argv,
			"-c", "mcp_servers.cotal.command="+tomlString(srv.Command),
			"-c", "mcp_servers.cotal.args="+tomlStrings(srv.Args),
			"-c", "notify="+tomlStrings(notify),
		)
		// Its hooks (Codex from May 2026 on) keep the status through the turn and hand in what
		// arrives: at a prompt, after a tool (a DM, task or mention), and at the turn's end, which
		// then goes on with it. Codex runs a hook it has not been told to trust only under
		// --dangerously-bypass-hook-trust, for these hooks, which cotal wrote, and for any other
		// the person has enabled; COTAL_CODEX_HOOKS=0 in the spawn's environment leaves them out,
		// for an older Codex or a person who would rather trust them in Codex's /hooks.
		if !slices.Contains(spawnEnv, CodexHooksEnv+"=0") {
			argv = append(argv, CodexHookArgs(srv.Command, m.Space, m.Principal)...)
		}
		return append(append(argv, args...), h.kickoffArgs(sp.Kickoff)...), nil, nil
	case HarnessOpenCode:
		// The cotal plugin keeps the agent's status and, while the session is idle, starts a turn
		// with what should wake it (opencode/cotal.js).
		plugin := filepath.Join(dir, "cotal-opencode.js")
		if err := atomicfile.Write(plugin, openCodePlugin, 0o600); err != nil {
			return nil, nil, err
		}
		path := filepath.Join(dir, "opencode.json")
		cfg := map[string]any{
			"$schema": "https://opencode.ai/config.json",
			"mcp":     map[string]any{"cotal": map[string]any{"type": "local", "command": append([]string{srv.Command}, srv.Args...), "enabled": true}},
			"plugin":  []string{(&url.URL{Scheme: "file", Path: plugin}).String()},
		}
		raw, _ := json.MarshalIndent(cfg, "", "  ") // always encodes
		if err := atomicfile.Write(path, raw, 0o600); err != nil {
			return nil, nil, err
		}
		env := []string{"OPENCODE_CONFIG=" + path, PluginBinEnv + "=" + srv.Command, PluginSpaceEnv + "=" + m.Space, PluginAgentEnv + "=" + m.Principal}
		argv = append([]string{"opencode"}, h.resumeArgs(sp.Resume)...)
		if sp.Model != "" {
			argv = append(argv, "--model", sp.Model)
		}
		return append(append(argv, args...), h.kickoffArgs(sp.Kickoff)...), env, nil
	case HarnessCotal:
		// The cotal binary that serves `cotal mcp` runs the agent on the launch material.
		// It yields each turn a workflow run asks of it done, so a run can be tried with no model.
		return append([]string{srv.Command, "agent", "--echo", "--on-turn", "done"}, args...), nil, nil
	}
	return nil, nil, h.validate()
}

// openCodePlugin is the cotal plugin the opencode preset loads.
//
//go:embed opencode/cotal.js
var openCodePlugin []byte

// The environment that names the agent to the OpenCode plugin: the cotal command, the space and
// the agent's principal.
const (
	PluginBinEnv   = "COTAL_BIN"
	PluginSpaceEnv = "COTAL_SPACE"
	PluginAgentEnv = "COTAL_AGENT"
)

// CodexHooksEnv, set to 0 in a spawn's environment, starts a Codex agent without its hooks.
const CodexHooksEnv = "COTAL_CODEX_HOOKS"

// CodexHookArgs returns the Codex arguments that run `cotal hook` (cotal being the command) at the
// agent's turn boundaries, principal being the agent's and space its space: a -c override per
// hook (Codex reads hooks from that layer too), and --dangerously-bypass-hook-trust, without which
// Codex skips a hook no person has trusted in its /hooks.
func CodexHookArgs(cotal, space, principal string) []string {
	var args []string
	for _, h := range codexHooks {
		command := shellQuote(cotal) + " hook " + h.event + " --space " + shellQuote(space) + " --agent " + shellQuote(principal)
		args = append(args, "-c", "hooks."+h.codex+"=[{hooks=[{type=\"command\",command="+tomlString(command)+"}]}]")
	}
	return append(args, "--dangerously-bypass-hook-trust")
}

// codexHooks maps the Codex hook events cotal configures to the events of `cotal hook`.
var codexHooks = []struct{ codex, event string }{
	{"SessionStart", HookSessionStart}, {"UserPromptSubmit", HookPrompt}, {"PreToolUse", HookTool},
	{"PermissionRequest", HookNotification}, {"PostToolUse", HookToolDone}, {"Stop", HookTurnEnd},
}

// ClaudeChannelEnv, set to 1 in a Claude Code agent's environment, tells its `cotal mcp` to push
// wakes into the session's channel (`cotal mcp --claude-channel`).
const ClaudeChannelEnv = "COTAL_CHANNEL"

// The hook events `cotal hook` takes: the turn boundaries a harness reports to its agent's
// `cotal mcp`.
const (
	HookSessionStart = "session-start" // the harness session began: idle, attention open
	HookPrompt       = "prompt"        // a turn begins: working; what waits is handed in
	HookTool         = "tool"          // a tool is about to run: working, on it
	HookNotification = "notification"  // the harness waits on its person: waiting
	HookToolDone     = "tool-done"     // a tool ran: a DM, task or mention that came meanwhile is handed in
	HookStop         = "stop"          // the turn ended: idle
	HookTurnEnd      = "turn-end"      // the turn would end: what should wake the agent is handed in and the turn goes on; else idle
	HookSessionEnd   = "session-end"   // the session ended: idle
	HookWait         = "wait"          // an idle harness waits a while for what should wake it; handed in
	HookIdleWait     = "idle-wait"     // its manager waits a while for what should wake an idle agent; a line to type, nothing handed in
	HookTurn         = "turn"          // its manager tells it of a turn a workflow run asks of it (a PendingTurn): it wakes the agent as a DM does
	HookConclaves    = "conclaves"     // its manager tells it which conclave channels of workflow runs it is a member of now (a SeatConclaves)
)

// HookEvents lists them.
var HookEvents = []string{HookSessionStart, HookPrompt, HookTool, HookToolDone, HookNotification, HookStop, HookTurnEnd, HookSessionEnd, HookWait, HookIdleWait, HookTurn, HookConclaves}

// claudeHooks is Claude Code's settings for the agent's hooks: each of its turn boundaries runs
// `cotal hook`, so the agent's status follows the session and what arrived between turns is handed
// in at the next prompt.
func claudeHooks(cotal, space, principal string) map[string]any {
	hook := func(event string) []map[string]any {
		command := shellQuote(cotal) + " hook " + event + " --space " + shellQuote(space) + " --agent " + shellQuote(principal)
		return []map[string]any{{"matcher": "*", "hooks": []map[string]string{{"type": "command", "command": command}}}}
	}
	return map[string]any{"hooks": map[string]any{
		"SessionStart": hook(HookSessionStart), "UserPromptSubmit": hook(HookPrompt), "PreToolUse": hook(HookTool),
		"Notification": hook(HookNotification), "Stop": hook(HookStop), "SessionEnd": hook(HookSessionEnd),
	}}
}

// tomlStrings is ss as a TOML array of basic strings, for a Codex -c override.
func tomlStrings(ss []string) string {
	quoted := make([]string, len(ss))
	for i, s := range ss {
		quoted[i] = tomlString(s)
	}
	return "[" + strings.Join(quoted, ",") + "]"
}

// tomlString is s as a TOML basic string: a quote, a backslash and every control character
// escaped as TOML spells them (Go's quoting would write \x.., which TOML has not).
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
