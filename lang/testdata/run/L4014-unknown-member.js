// fails: L4014
const xs = [1]
log(xs.nope)
