// fails: L3022
// script: {"faults": [{"at": "spawn:second#0", "kind": "worktree-shared", "code": "L3022"}]}
const a = await spawn("coder", { name: "first", worktree: "wt" })
const b = await spawn("coder", { name: "second", worktree: "wt" })
