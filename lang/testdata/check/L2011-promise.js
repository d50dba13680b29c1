// refused: L2011
const p = Promise.resolve(1)
