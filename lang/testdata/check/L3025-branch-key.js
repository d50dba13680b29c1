// refused: L3025
await parallel({ "a/b": () => sleep("1s") })
