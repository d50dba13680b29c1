// refused: L3012
const a = await spawn("a")
await turn(a, { deadline: "10m" })
