// refused: L3045
await waitUntil("ready", { name: "ci", every: "1m", deadline: "1h" })
