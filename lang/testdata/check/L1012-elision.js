// refused: L1012
const xs = [1, , 3]
