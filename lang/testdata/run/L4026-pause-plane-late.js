// fails: L4026
// script: {"faults": [{"at": "checkpoint:approve#0", "kind": "pause-plane", "code": "L4026"}]}
await checkpoint("approve", "Ship?", { timeout: "1h" })
