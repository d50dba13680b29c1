// accepted
const rs = await fanOut([{ id: "a" }, { id: "b" }], async (item) => {
  const agent = await spawn("worker", { name: `w-${item.id}` })
  return await turn(agent, { name: "work" })
}, { name: "each" })
const both = await parallel({
  nap: () => sleep("1s"),
  wait: () => wait(message(channel("general"), { from: "lead" }), { timeout: "1m" }),
}, { name: "both" })
const lead = await spawn("lead")
const talk = await conclave([lead], async (room) => {
  return await turn(lead, { name: "talk" })
}, { name: "huddle" })
log(rs, both, talk)
