// refused: L1019
const d = new Date()
