// fails: L3021
await fanOut([1, 2], async (n) => n, { name: "each" })
