// fails: L4025
// script: {"faults": [{"at": "sleep:nap#0", "kind": "host", "code": "L4025", "message": "the host was off the CPU for 40s of a 30s window"}]}
await sleep("30s", { name: "nap" })
