// refused: L1029
const x = 1 +
