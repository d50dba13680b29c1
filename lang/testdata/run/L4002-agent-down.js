// fails: L4002
// script: {"faults": [{"at": "turn:build#0", "kind": "agent-down"}]}
const a = await spawn("coder")
try {
  await turn(a, { name: "build" })
} catch (e) {
  assert(e.code === "L4002" && e.kind === "agent-down", "the failure keeps its code and kind")
  throw e
}
