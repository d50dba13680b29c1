// fails: L4010
const o = null
log(o.x)
