// refused: L3046
await waitUntil(async () => null, { name: "ci", every: "1m" })
