// refused: L1005
function* g() { yield 1 }
