// fails: L6001
const a = await spawn("a")
await turn(a, { name: "go" })
