// refused: L1004
const r = { a: 1 }
for (const k in r) { log(k) }
