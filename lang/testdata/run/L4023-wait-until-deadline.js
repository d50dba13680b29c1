// fails: L4023
await waitUntil(async () => null, { name: "ci", every: "10m", deadline: "30m" })
