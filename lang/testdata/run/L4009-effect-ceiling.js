// fails: L4009
for (const i of range(10001)) { await sleep("1ms") }
