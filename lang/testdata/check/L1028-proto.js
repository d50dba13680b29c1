// refused: L1028
const o = { __proto__: null }
