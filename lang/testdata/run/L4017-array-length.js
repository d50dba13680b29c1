// fails: L4017
const xs = [1]
xs.length = 3
