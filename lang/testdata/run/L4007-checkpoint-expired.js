// fails: L4007
// script: {"checkpoints": {"approve": {"status": "expired"}}}
await checkpoint("approve", "Ship?", { timeout: "1h" })
