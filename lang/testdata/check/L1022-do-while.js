// refused: L1022
let i = 0
do { i++ } while (i < 3)
