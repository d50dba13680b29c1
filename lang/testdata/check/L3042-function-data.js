// refused: L3042
const a = await spawn("a")
await ask(a, { name: "q", schema: () => 1 })
