// fails: L2032
const seen = []
await parallel({ a: async () => { seen.push(1) } }, { name: "p" })
