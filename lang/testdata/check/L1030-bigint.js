// refused: L1030
const big = 10n
