// fails: L4019
const xs = [1]
xs[5] = 1
