// refused: L1002
const f = () => this
