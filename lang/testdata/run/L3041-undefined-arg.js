// fails: L3041
const o = {}
await sleep("1m", { name: o.missing })
await ask(await spawn("a"), { name: "q", schema: { x: o.missing } })
