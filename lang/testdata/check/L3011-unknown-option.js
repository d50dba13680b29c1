// refused: L3011
await sleep("1m", { nmae: "nap" })
