// fails: L4004
// script: {"turns": {"plan": {"status": "handoff", "to": "b"}}, "faults": [{"at": "turn:build#0", "kind": "handoff-worktree", "code": "L4004"}]}
const a = await spawn("planner", { worktree: "one" })
const b = await spawn("coder", { worktree: "two" })
await turn(a, { name: "plan" })
await turn(b, { name: "build" })
