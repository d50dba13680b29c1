// refused: L2003
const a = 1
a = 2
