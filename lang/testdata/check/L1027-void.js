// refused: L1027
const u = void 0
