// accepted
const xs = [3, 1, 2]
const ys = sort(xs)
let total = 0
for (const x of ys) {
  total += x
}
const { a, b: [c = 1, ...rest] } = { a: 1, b: [2, 3] }
log(`total ${total}`, keys({ a: 1 }), len(xs), a, c, rest)
function twice(n) {
  return n * 2
}
const t = twice(total)
switch (t) {
  case 12: {
    log("twelve")
    break
  }
  default:
    log("other")
}
let i = 0
while (i < 3) {
  i++
}
try {
  assert(i === 3, "three")
} catch (e) {
  log(e.code)
} finally {
  log("done")
}
const o = { ...{ a: 1 }, m() { return 1 } }
const maybe = o?.missing?.[0] ?? "none"
log(maybe, (2) ** 3, typeof o, !o, xs.map((x) => x * 2).join(","))
