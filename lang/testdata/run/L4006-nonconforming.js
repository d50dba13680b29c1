// fails: L4006
// script: {"asks": {"q": [{"x": 1}, {"x": 2}]}}
const a = await spawn("a")
await ask(a, { name: "q", schema: { x: "string" }, attempts: 2 })
