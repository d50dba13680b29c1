// refused: L2032
let done = 0
async function work() {
  await sleep("1m")
  done = 1
}
await parallel({ a: work, b: work }, { name: "both" })
