// refused: L1009
const x = 1
if (x) log(x)
