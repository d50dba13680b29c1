// refused: L1003
var count = 1
log(count)
