// refused: L3014
await sleep("1m", { name: "Nap Time" })
