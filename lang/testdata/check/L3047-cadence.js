// refused: L3047
await waitUntil(async () => null, { name: "ci", every: "0s", deadline: "1h" })
