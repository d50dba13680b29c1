// fails: L4011
const n = 1
n()
