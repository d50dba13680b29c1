// refused: L2013
async function work(n) { return await sleep("1m") }
const pa = work(1)
const pb = work(2)
