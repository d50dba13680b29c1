// refused: L1026
let a = 1
a = (1, 2)
