// fails: L4015
for (const x of 5) { log(x) }
