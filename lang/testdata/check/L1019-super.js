// refused: L1019
const o = { m() { return super.m() } }
