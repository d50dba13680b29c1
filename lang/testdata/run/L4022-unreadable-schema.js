// fails: L4022
const a = await spawn("a")
await ask(a, { name: "q", schema: { x: "thing" } })
