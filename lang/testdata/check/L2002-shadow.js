// refused: L2002
const keys = [1, 2]
