// refused: L1007
const r = /ab+c/g
