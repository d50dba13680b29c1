// refused: L2032
let winner = null
const a = await spawn("a")
const b = await spawn("b")
await parallel({
  first: async () => { const r = await turn(a, { name: "go" }); winner = r },
  second: async () => { const r = await turn(b, { name: "go" }); winner = r },
})
