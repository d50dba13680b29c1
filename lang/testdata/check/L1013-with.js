// refused: L1013
const o = { a: 1 }
with (o) { log(a) }
