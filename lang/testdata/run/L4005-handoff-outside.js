// fails: L4005
// script: {"faults": [{"at": "turn:plan#0", "kind": "handoff-outside-run", "code": "L4005"}]}
const a = await spawn("planner")
await turn(a, { name: "plan" })
