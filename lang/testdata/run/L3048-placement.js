// fails: L3048
await spawn("coder", { name: "pinned", placement: { endpoint: "manager" } })
