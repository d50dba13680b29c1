// refused: L1004
const r = { a: 1 }
const b = "a" in r
