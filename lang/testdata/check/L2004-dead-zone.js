// refused: L2004
log(a)
const a = 1
