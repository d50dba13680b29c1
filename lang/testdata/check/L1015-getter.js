// refused: L1015
const o = { get size() { return 1 } }
