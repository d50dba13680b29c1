// refused: L3041
await sleep(undefined)
