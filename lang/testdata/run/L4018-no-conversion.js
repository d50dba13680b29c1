// fails: L4018
const r = { a: 1 } + 1
