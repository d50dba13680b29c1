// refused: L3044
await checkpoint("approve", "Ship it?", { timeout: "1d", to: "lead" })
