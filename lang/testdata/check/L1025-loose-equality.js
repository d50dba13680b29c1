// refused: L1025
const same = 0 == ""
