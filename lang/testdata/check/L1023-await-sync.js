// refused: L1023
function f() { await sleep("1m") }
