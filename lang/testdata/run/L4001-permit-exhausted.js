// fails: L4001
// script: {"faults": [{"at": "spawn:coder#0", "kind": "permit-exhausted", "code": "L4001"}]}
await spawn("coder")
