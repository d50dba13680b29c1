// refused: L3043
const a = await spawn("a")
await notify([a], { decision: "build", outcome: "done", detail: { note: "two\nlines" } })
