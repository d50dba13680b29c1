// fails: L4008
// script: {"turns": {"a": {"status": "done"}}, "faults": [{"at": "/parallel:both#0/b:right/turn:b#0", "kind": "worktree-write", "code": "L4008"}]}
const x = await spawn("coder", { name: "x" })
const y = await spawn("coder", { name: "y" })
await parallel({
  left: async () => await turn(x, { name: "a" }),
  right: async () => await turn(y, { name: "b" }),
}, { name: "both" })
