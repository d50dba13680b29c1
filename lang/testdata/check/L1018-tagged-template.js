// refused: L1018
function tag(s) { return s }
const t = tag`x`
