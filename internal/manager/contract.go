package manager

import (
	"encoding/json"
	"slices"
	"sync"

	"github.com/gocotal/cotal/internal/contract"
	"github.com/gocotal/cotal/wire"
)

// The manager endpoint's contract: the reference's ai.cotal.manager cluster, declared as the
// reference declares it (class, targeting, modes, capability and the exact input and output
// schemas of every command), so a caller of either implementation pins the same digests and a
// TypeScript caller drives a Go manager.

// The cluster's URN and revision: the reference's revision 17, every one of its 29 commands
// declared as it declares them, so the document and its closure digest are the reference's own
// and a caller pinning either finds the other. The commands cotal-go does not implement
// (unimplemented) are declared and not served: no Go manager subscribes them, so a call on the
// class rail reaches a manager that implements them; serving all 29 on both rails would also
// put the serving credential over the SPEC's 16 KiB size gate in most spaces.
const (
	ClusterURN      = "ai.cotal.manager"
	ClusterRevision = 17
)

// The contract's commands.
const (
	CommandStatus  = "status"
	CommandPs      = "ps"
	CommandInspect = "inspect"
	CommandSpawn   = "spawn"
	CommandDespawn = "despawn"
	CommandAttach  = "attach"
	CommandInput   = "input"
	CommandStop    = "stop"
	CommandModels  = "models"
	// CommandResolveCwd resolves a working directory on the manager's host before a spawn there.
	CommandResolveCwd    = "resolve-cwd"
	CommandDefinePersona = "define-persona"
	CommandListPersonas  = "list-personas"
	CommandShowPersona   = "show-persona"
	CommandLaunch        = "launch"
	// The turn relay family: wake a seat for one turn (turn, on its caller's behalf), and the
	// seat's own pending turns and yield.
	CommandTurn        = "turn"
	CommandTurnPending = "turn-pending"
	CommandTurnYield   = "turn-yield"
	// CommandPurge and the preserved-resume family are the reference's; cotal-go declares them
	// and does not serve them.
	CommandPurge               = "purge"
	CommandResumePreserved     = "resume-preserved"
	CommandCommitResume        = "commit-resume"
	CommandFinalizeResume      = "finalize-resume"
	CommandPreparePreservation = "prepare-preservation"
	CommandCommitPreservation  = "commit-preservation"
	CommandAbortPreservation   = "abort-preservation"
	// The workflow-run family (SPEC §14.3): the manager hosts runs' drivers.
	CommandRunStart  = "run-start"
	CommandRunResume = "run-resume"
	CommandRunAnswer = "run-answer"
	CommandRunStatus = "run-status"
	CommandRunPs     = "run-ps"
)

// The capabilities the commands require (SPEC §13.9), as the reference names them.
const (
	capRead      = "manager.read"
	capSpawn     = "manager.spawn"
	capLifecycle = "manager.lifecycle"
	capSelf      = "manager.self"
	capPersona   = "manager.persona"
	capAdmin     = "manager.admin"
	capRun       = "manager.run"
)

// The schemas, byte for byte the reference's (rev 17): their canonical forms fix the digests.
// Those of models, the persona commands and launch are the reference's as its contract source
// spells them; resolve-cwd's and define-persona's grant fields follow its documented shapes.
const (
	statusOutput   = `{"type":"object","additionalProperties":false,"required":["instanceId","runtime","custody","agentCount","uptimeMs","connectors","classSpawn","staticReconciliation"],"properties":{"instanceId":{"type":"string"},"runtime":{"type":"string"},"custody":{"enum":["legacy","custodied"]},"agentCount":{"type":"integer","minimum":0},"uptimeMs":{"type":"integer","minimum":0},"classSpawn":{"type":"boolean"},"connectors":{"type":"array","items":{"type":"object","additionalProperties":false,"required":["agent","state","binaries"],"properties":{"agent":{"type":"string"},"state":{"enum":["available","unavailable"]},"binaries":{"type":"object","additionalProperties":{"type":"string"}},"reason":{"type":"string"}}}},"staticReconciliation":{"type":"object","additionalProperties":false,"required":["state","failures"],"properties":{"state":{"enum":["idle","running","retry-wait","retrying","recovered","failed"]},"lastSweep":{"type":"object","additionalProperties":false,"required":["kind","startedAt","attempted","succeeded","failed"],"properties":{"kind":{"enum":["startup","post-adoption"]},"startedAt":{"type":"string"},"completedAt":{"type":"string"},"attempted":{"type":"integer","minimum":0},"succeeded":{"type":"integer","minimum":0},"failed":{"type":"integer","minimum":0}}},"failures":{"type":"array","items":{"type":"object","additionalProperties":false,"required":["alias","actor","lifecycleUid","phase","attempts","maxAttempts","disposition"],"properties":{"alias":{"type":"string"},"actor":{"type":"string"},"lifecycleUid":{"type":"string"},"phase":{"enum":["provisioning","active","terminalizing","retired"]},"attempts":{"type":"integer","minimum":0},"maxAttempts":{"type":"integer","minimum":1},"disposition":{"enum":["retry-scheduled","retrying","recovered","refused","refused-foreign","retry-exhausted"]},"lastError":{"type":"string"},"nextRetryAt":{"type":"string"},"recoveredAt":{"type":"string"},"remedy":{"type":"string"}}}}}}}}`
	agentRow       = `{"type":"object","additionalProperties":false,"required":["name","id","agent","space","mode","status","uptimeMs","mesh","lifecycleUid"],"properties":{"name":{"type":"string"},"id":{"type":"string"},"role":{"type":"string"},"agent":{"type":"string"},"space":{"type":"string"},"mode":{"type":"string"},"status":{"type":"string"},"uptimeMs":{"type":"integer","minimum":0},"mesh":{"type":"string"},"meshView":{"type":"string","enum":["current","stale","unpopulated"]},"lifecycleUid":{"type":"string"},"authHealth":{"type":"string"},"authReason":{"type":"string"},"model":{"type":"string"},"variant":{"type":"string"},"cwd":{"type":"string"},"pid":{"type":"integer","minimum":1},"spawner":{"type":"string"},"instanceId":{"type":"string"},"host":{"type":"string"}}}`
	psOutput       = `{"type":"array","items":` + agentRow + `}`
	inspectInput   = `{"type":"object","additionalProperties":false,"required":["name"],"properties":{"name":{"type":"string","minLength":1}}}`
	spawnInput     = `{"type":"object","additionalProperties":false,"required":["name"],"properties":{"name":{"type":"string","minLength":1},"agent":{"type":"string"},"defaultAgent":{"type":"string"},"role":{"type":"string"},"config":{"type":"string"},"identity":{"type":"string"},"model":{"type":"string"},"variant":{"type":"string"},"launchOptions":{"type":"object"},"resume":{"type":"string"},"continueSession":{"type":"string"},"events":{"type":"boolean"},"cwd":{"type":"string"},"prompt":{"type":"string"},"subscribe":{"type":"array","items":{"type":"string"}},"allowSubscribe":{"type":"array","items":{"type":"string"}},"allowPublish":{"type":"array","items":{"type":"string"}},"shareTools":{"type":"string"},"supervise":{"type":"object","additionalProperties":false,"required":["restarts","windowMs"],"properties":{"restarts":{"type":"integer","minimum":1},"windowMs":{"type":"integer","minimum":1}}}}}`
	spawnOutput    = `{"type":"object","additionalProperties":false,"required":["name","owner","actor","uid","goalId","fingerprint","executor"],"properties":{"name":{"type":"string"},"owner":{"type":"string"},"actor":{"type":"string"},"uid":{"type":"string"},"goalId":{"type":"string"},"fingerprint":{"type":"string"},"readinessDeadlineMs":{"type":"integer","minimum":1},"executor":{"type":"object","additionalProperties":false,"required":["lifecycleUid","epoch"],"properties":{"lifecycleUid":{"type":"string"},"epoch":{"type":"integer","minimum":0}}}}}`
	gracefulIn     = `{"type":"object","additionalProperties":false,"properties":{"graceful":{"type":"boolean"}}}`
	attachOutput   = `{"type":"object","additionalProperties":false,"required":["grant"],"properties":{"grant":{"type":"object"}}}`
	inputInput     = `{"type":"object","additionalProperties":false,"required":["text"],"properties":{"text":{"type":"string","minLength":1,"maxLength":65536},"enter":{"type":"boolean"}}}`
	inputOutput    = `{"type":"object","additionalProperties":false,"required":["name","bytes"],"properties":{"name":{"type":"string"},"bytes":{"type":"integer","minimum":0}}}`
	modelsInput    = `{"type":"object","additionalProperties":false,"properties":{"agent":{"type":"string"},"refresh":{"type":"boolean"}}}`
	modelsOutput   = `{"type":"object","additionalProperties":false,"required":["catalogs"],"properties":{"catalogs":{"type":"array","items":{"type":"object","required":["agent","supported","models"],"properties":{"agent":{"type":"string"},"supported":{"type":"boolean"},"models":{"type":"array"},"error":{"type":"string"}}}}}}`
	cwdInput       = `{"type":"object","additionalProperties":false,"required":["cwd"],"properties":{"cwd":{"type":"string","minLength":1}}}`
	cwdOutput      = `{"type":"object","additionalProperties":false,"required":["cwd","host"],"properties":{"cwd":{"type":"string"},"host":{"type":"string"}}}`
	personaIn      = `{"type":"object","additionalProperties":false,"required":["name","persona"],"properties":{"name":{"type":"string","minLength":1},"persona":{"type":"string","minLength":1},"model":{"type":"string"},"role":{"type":"string"},"agent":{"type":"string"},"subscribe":{"type":"array","items":{"type":"string"}},"allowSubscribe":{"type":"array","items":{"type":"string"}},"allowPublish":{"type":"array","items":{"type":"string"}}}}`
	personaOut     = `{"type":"object","additionalProperties":false,"required":["name","path"],"properties":{"name":{"type":"string"},"path":{"type":"string"}}}`
	personaSchema  = `{"type":"object","additionalProperties":false,"required":["name"],"properties":{"name":{"type":"string"},"role":{"type":"string"},"model":{"type":"string"},"description":{"type":"string"},"owner":{"type":"string"},"error":{"type":"string"}}}`
	personasOut    = `{"type":"object","additionalProperties":false,"required":["personas"],"properties":{"personas":{"type":"array","items":` + personaSchema + `}}}`
	showOutput     = `{"type":"object","additionalProperties":false,"required":["name"],"properties":{"name":{"type":"string"},"role":{"type":"string"},"model":{"type":"string"},"description":{"type":"string"},"owner":{"type":"string"},"persona":{"type":"string"},"error":{"type":"string"}}}`
	launchInput    = `{"type":"object","additionalProperties":false,"required":["runId","name"],"properties":{"runId":{"type":"string","minLength":1},"name":{"type":"string","minLength":1},"spec":{"type":"object"}}}`
	stopOutput     = `{"type":"object","additionalProperties":false,"required":["name","stopped","graceful"],"properties":{"name":{"type":"string"},"stopped":{"type":"boolean"},"graceful":{"type":"boolean"}}}`
	turnIn         = `{"type":"object","additionalProperties":false,"required":["payload","deadlineMs"],"properties":{"payload":{"type":"string","minLength":1,"maxLength":65536},"deadlineMs":{"type":"integer","minimum":1},"handoffFrom":{"type":"string","minLength":1,"maxLength":200}}}`
	turnOut        = `{"type":"object","additionalProperties":false,"required":["name","owner","actor","uid","goalId","fingerprint","deadlineAt","executor"],"properties":{"name":{"type":"string"},"owner":{"type":"string"},"actor":{"type":"string"},"uid":{"type":"string"},"goalId":{"type":"string"},"fingerprint":{"type":"string"},"deadlineAt":{"type":"integer","minimum":1},"executor":{"type":"object","additionalProperties":false,"required":["lifecycleUid","epoch"],"properties":{"lifecycleUid":{"type":"string"},"epoch":{"type":"integer","minimum":0}}}}}`
	turnPendingOut = `{"type":"object","additionalProperties":false,"required":["turns"],"properties":{"turns":{"type":"array","items":{"type":"object","additionalProperties":false,"required":["goalId","payload","acceptedAt","deadlineAt"],"properties":{"goalId":{"type":"string"},"payload":{"type":"string"},"acceptedAt":{"type":"integer","minimum":0},"deadlineAt":{"type":"integer","minimum":1}}}}}}`
	turnYieldIn    = `{"type":"object","additionalProperties":false,"required":["goalId","status"],"properties":{"goalId":{"type":"string","minLength":1},"status":{"enum":["done","blocked","handoff"]},"to":{"type":"string","minLength":1},"note":{"type":"string","maxLength":4096}}}`
	turnYieldOut   = `{"type":"object","additionalProperties":false,"required":["goalId","state"],"properties":{"goalId":{"type":"string"},"state":{"enum":["succeeded","failed","cancelled","expired","uncertain"]}}}`
	runStartIn     = `{"type":"object","additionalProperties":false,"required":["source"],"properties":{"source":{"type":"string","minLength":1},"file":{"type":"string","minLength":1},"timeout":{"type":"string","minLength":1}}}`
	runResumeIn    = `{"type":"object","additionalProperties":false,"required":["runId"],"properties":{"runId":{"type":"string","minLength":1},"timeout":{"type":"string","minLength":1}}}`
	runIDIn        = `{"type":"object","additionalProperties":false,"required":["runId"],"properties":{"runId":{"type":"string","minLength":1},"endpoint":{"type":"string","minLength":1}}}`
	runIDOut       = `{"type":"object","additionalProperties":false,"required":["runId"],"properties":{"runId":{"type":"string"}}}`
	runPsIn        = `{"type":"object","additionalProperties":false,"properties":{"endpoint":{"type":"string","minLength":1}}}`
	runRow         = `{"type":"object","additionalProperties":false,"required":["runId","endpoint"],"properties":{"runId":{"type":"string"},"endpoint":{"type":"string"},"state":{"type":"string","enum":["running","released","completed","failed"]},"holder":{"type":"string"},"epoch":{"type":"integer","minimum":0},"journalHigh":{"type":"integer","minimum":-1},"forkedFrom":{"type":"object","additionalProperties":false,"required":["run","step"],"properties":{"run":{"type":"string"},"step":{"type":"string"}}}}}`
	runPsOut       = `{"type":"array","items":` + runRow + `}`
	runJournalRow  = `{"type":"object","additionalProperties":false,"required":["n","kind"],"properties":{"n":{"type":"integer","minimum":0},"kind":{"type":"string","enum":["activation","step"]},"holder":{"type":"string"},"epoch":{"type":"integer","minimum":0},"replayedTo":{"type":"integer","minimum":0},"step":{"type":"string"},"state":{"type":"string","enum":["pending","settled"]},"outcome":{"type":"string"},"asks":{"type":"string"},"addressee":{"type":"string"},"answer":{"type":"object","additionalProperties":false,"required":["answerId"],"properties":{"answerId":{"type":"string"},"value":{},"by":{"type":"string"},"artifact":{"type":"string"},"at":{"type":"number"}}}}}`
	runStatusOut   = `{"type":"object","additionalProperties":false,"required":["runId","endpoint","spec","journal"],"properties":{"runId":{"type":"string"},"endpoint":{"type":"string"},"spec":{"type":"object"},"status":{"type":"object"},"journal":{"type":"array","items":` + runJournalRow + `}}}`
	runAnswerIn    = `{"type":"object","additionalProperties":false,"required":["runId","stepKey"],"properties":{"runId":{"type":"string","minLength":1},"endpoint":{"type":"string","minLength":1},"stepKey":{"type":"string","minLength":1},"value":{},"artifact":{"type":"string","minLength":1}}}`
	runAnswerOut   = `{"type":"object","additionalProperties":false,"required":["token","answerId","settle"],"properties":{"token":{"type":"string"},"answerId":{"type":"string"},"settle":{"type":"object"}}}`
	purgeIn        = `{"type":"object","additionalProperties":false,"properties":{"includeDms":{"type":"boolean"}}}`
	purgeOut       = `{"type":"object","additionalProperties":false,"required":["chat"],"properties":{"chat":{"type":"integer","minimum":0},"dm":{"type":"integer","minimum":0}}}`
	anyObject      = `{"type":"object"}`
	resumeIn       = `{"type":"object","additionalProperties":false,"required":["attemptId","inventory"],"properties":{"attemptId":{"type":"string","minLength":1},"inventory":{"type":"object"}}}`
	attemptIn      = `{"type":"object","additionalProperties":false,"required":["attemptId"],"properties":{"attemptId":{"type":"string","minLength":1}}}`
	commitOut      = `{"type":"object","additionalProperties":false,"required":["attemptId","state","durableCommitToken"],"properties":{"attemptId":{"type":"string"},"state":{"type":"string"},"durableCommitToken":{"type":"string"}}}`
	finalizeIn     = `{"type":"object","additionalProperties":false,"required":["attemptId","durableCommitToken"],"properties":{"attemptId":{"type":"string","minLength":1},"durableCommitToken":{"type":"string","minLength":1}}}`
	attemptOut     = `{"type":"object","additionalProperties":false,"required":["attemptId","state"],"properties":{"attemptId":{"type":"string"},"state":{"type":"string"}}}`
)

// unimplemented are the reference's commands cotal-go declares but does not implement.
var unimplemented = []string{
	CommandPurge, CommandResumePreserved, CommandCommitResume, CommandFinalizeResume,
	CommandPreparePreservation, CommandCommitPreservation, CommandAbortPreservation,
}

// declarations are the cluster's commands in the reference's order.
func declarations() []contract.Declaration {
	cmd := func(name, capability string, modes []wire.AuthzMode, in, out string) contract.Declaration {
		return contract.Declaration{
			Command: contract.Command{Name: name, Class: wire.ClassEphemeral, Targeted: len(modes) > 0, Modes: modes, Capability: capability},
			Input:   json.RawMessage(in), Output: json.RawMessage(out),
		}
	}
	return []contract.Declaration{
		cmd(CommandStatus, capRead, nil, contract.VoidSchema, statusOutput),
		cmd(CommandPs, capRead, nil, contract.VoidSchema, psOutput),
		cmd(CommandInspect, capRead, nil, inspectInput, agentRow),
		cmd(CommandModels, capRead, nil, modelsInput, modelsOutput),
		cmd(CommandResolveCwd, capSpawn, nil, cwdInput, cwdOutput),
		cmd(CommandSpawn, capSpawn, nil, spawnInput, spawnOutput),
		cmd(CommandDespawn, capLifecycle, []wire.AuthzMode{wire.ModeOwner, wire.ModeAny}, gracefulIn, stopOutput),
		cmd(CommandAttach, capLifecycle, []wire.AuthzMode{wire.ModeOwner, wire.ModeAny}, contract.VoidSchema, attachOutput),
		cmd(CommandInput, capLifecycle, []wire.AuthzMode{wire.ModeOwner, wire.ModeAny}, inputInput, inputOutput),
		cmd(CommandTurn, capLifecycle, []wire.AuthzMode{wire.ModeOwner, wire.ModeAny}, turnIn, turnOut),
		cmd(CommandTurnPending, capSelf, []wire.AuthzMode{wire.ModeSelf}, contract.VoidSchema, turnPendingOut),
		cmd(CommandTurnYield, capSelf, []wire.AuthzMode{wire.ModeSelf}, turnYieldIn, turnYieldOut),
		cmd(CommandStop, capSelf, []wire.AuthzMode{wire.ModeSelf}, gracefulIn, stopOutput),
		cmd(CommandRunStart, capRun, nil, runStartIn, runIDOut),
		cmd(CommandRunResume, capRun, nil, runResumeIn, runIDOut),
		cmd(CommandRunAnswer, capRun, []wire.AuthzMode{wire.ModeSelf}, runAnswerIn, runAnswerOut),
		cmd(CommandRunStatus, capRead, nil, runIDIn, runStatusOut),
		cmd(CommandRunPs, capRead, nil, runPsIn, runPsOut),
		cmd(CommandDefinePersona, capPersona, nil, personaIn, personaOut),
		cmd(CommandListPersonas, capRead, nil, contract.VoidSchema, personasOut),
		cmd(CommandShowPersona, capRead, nil, inspectInput, showOutput),
		cmd(CommandPurge, capAdmin, nil, purgeIn, purgeOut),
		cmd(CommandLaunch, capAdmin, nil, launchInput, spawnOutput),
		cmd(CommandResumePreserved, capAdmin, nil, resumeIn, anyObject),
		cmd(CommandCommitResume, capAdmin, nil, attemptIn, commitOut),
		cmd(CommandFinalizeResume, capAdmin, nil, finalizeIn, attemptOut),
		cmd(CommandPreparePreservation, capAdmin, nil, attemptIn, anyObject),
		cmd(CommandCommitPreservation, capAdmin, nil, attemptIn, anyObject),
		cmd(CommandAbortPreservation, capAdmin, nil, attemptIn, attemptOut),
	}
}

// Contract returns the manager's cluster, built once: its document, closure, compiled schemas and
// artifacts.
var Contract = sync.OnceValues(func() (*contract.Cluster, error) {
	return contract.NewCluster(ClusterURN, ClusterRevision, declarations()...)
})

// Commands returns the names of the commands the manager serves, in its contract's order, and
// the reserved cancel of its spawn goals: the rows its serving credential holds. The commands
// the contract declares but cotal-go does not implement have no rows.
func Commands() []string {
	var out []string
	for _, d := range declarations() {
		if !slices.Contains(unimplemented, d.Command.Name) {
			out = append(out, d.Command.Name)
		}
	}
	return append(out, wire.CommandCancel)
}
