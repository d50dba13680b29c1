// digest: sha256:1d80886f5c825764174f37ee40e1eaa720c29dbfa3dfc1f7f38ebf9969b90ed3
const out = await race({
  a: () => sleep("1m"),
  b: async () => {
    ("not a directive")
    await sleep("1h")
    function inner(k) { "use strict"; return k }
    const t = `A\u0041
B${inner(1)}\`q`
    const s = "a\"b\u00e9" + '\x41'
    const nums = [1e21, 0.000001, 1e-7, 0b101, 0o17, 123456789012345680000, 5e-324, 0.1 + 0.2]
    const o = { "k": 1, 0: 2, x: 3 }
    let { "k": kk, 0: zero } = o
    let q = null
    q ??= 1; q ||= 2; q &&= 3; q >>>= 1; q **= 2
    const c = o?.k?.toString() ?? (o?.k).toString()
    return [t, s, nums, kk, zero, c, ~q, q <= 2, q >> 1, [...nums, ...[1]]]
  },
}, { name: "edge" })
