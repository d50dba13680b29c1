// refused: L2001
const a = b + 1
