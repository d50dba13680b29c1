// refused: L1021
const o = { a: 1 }
delete o.a
