// warns: L3021
await fanOut([{ title: "a" }, { title: "b" }], async (item) => item.title, { name: "each" })
