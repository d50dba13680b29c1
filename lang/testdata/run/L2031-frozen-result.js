// fails: L2031
const o = await spawn("a")
o.agent = "x"
