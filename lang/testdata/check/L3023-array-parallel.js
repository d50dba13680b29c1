// warns: L3023
const a = await spawn("coder")
await parallel([
  async () => await turn(a, { name: "first" }),
  async () => await sleep("1m"),
])
