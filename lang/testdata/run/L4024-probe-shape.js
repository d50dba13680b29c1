// fails: L4024
await waitUntil(async () => 1, { name: "ci", every: "10m", deadline: "30m", terminal: (o) => "yes" })
