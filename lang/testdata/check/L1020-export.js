// refused: L1020
export const answer = 42
