// fails: L4003
// script: {"faults": [{"at": "turn:build#0", "kind": "turn-deadline", "code": "L4003"}]}
const a = await spawn("coder")
await turn(a, { name: "build", deadline: "10m" })
