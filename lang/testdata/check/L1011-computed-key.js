// refused: L1011
const k = "a"
const o = { [k]: 1 }
