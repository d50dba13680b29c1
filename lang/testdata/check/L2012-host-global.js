// refused: L2012
const x = Math.floor(1.5)
