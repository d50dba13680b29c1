// digest: sha256:259d139b2946d4afbd801ddd06f18b028f0cce4a5ee801fed9778cde7f07be1b
const out = await race({
  a: async () => await sleep("1m"),
  "b-key": async () => {
    "use strict"
    await sleep("1h")
    const { x, y: [first, third] = [], ...rest } = { x: 1 }
    let n = 0x1F + 1e3 + 1_000 + .5
    for (const v of [1, 2, ...rest.list]) { n += v; n++; --n }
    for (let i = 0; i < 3; i = i + 1) { if (i === 1) { continue } else if (i > 2) { break } else { n -= 1 } }
    while (n > 100) { n = n / 2 }
    switch (n) { case 1: { log("one"); break } default: log(`n is ${n}\tand ${x?.y?.[0] ?? "none"}`) }
    try { throw { code: "x" } } catch { log("caught") } finally { log("done") }
    try { assert(!false && typeof n === "number" || n !== 0, 'msg') } catch (e) { log(e.code) }
    const f = function named(p = 2, ...more) { return p * more.length }
    const g = (q) => q ? [q] : null
    return { x, n, f: f(1, 2), g: g(0), m: { k() { return 1 }, 2: "two", "s": 's', x }[x] }
  },
  c: () => sleep("2h"),
  1: async () => { await sleep("3h"); let z = 1; ({ x: z } = { x: 1 }); return (-z) ** 2 },
}, { name: "pick" })
log(out.index)
