// refused: L1008
const a = 1
const b = a
(log)(b)
