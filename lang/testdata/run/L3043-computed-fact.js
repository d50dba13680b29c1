// fails: L3043
const a = await spawn("a")
const o = "Not A Token"
await notify([a], { decision: "d", outcome: o })
