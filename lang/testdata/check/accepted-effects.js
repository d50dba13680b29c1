// accepted
const ok = await checkpoint("approve", "Ship it?", { timeout: "1d", onExpiry: "escalate", to: "lead" })
const seen = await waitUntil(async () => null, { name: "ci", every: "1m", deadline: "1h" })
const a = await spawn({ persona: "a", model: "opus" }, { role: "lead", join: ["general"] })
await monitor(a)
const down1 = await wait(down(a), { timeout: "1h" })
await notify([a], { decision: "ship", outcome: "approved", detail: { tries: 2, clean: true, note: "all green" } })
log(ok, seen, now(), random(), randomInt(6), pick([1, 2]), run().id, duration("1m"), down1)
