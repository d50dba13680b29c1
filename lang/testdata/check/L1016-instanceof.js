// refused: L1016
const a = []
const b = a instanceof Array
