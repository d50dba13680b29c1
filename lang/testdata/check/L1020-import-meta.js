// refused: L1020
const m = import.meta
