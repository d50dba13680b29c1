// refused: L1017
outer: for (const x of [1]) { break outer }
