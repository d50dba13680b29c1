// fails: L3024
await fanOut([{ id: "a" }, { id: "a" }], async (x) => x, { name: "each" })
