// refused: L3013
const a = await spawn("a")
const step = "go"
await turn(a, { name: step })
