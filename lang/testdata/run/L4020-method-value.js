// fails: L4020
const xs = [1]
const f = xs.map
