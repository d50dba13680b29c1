// fails: L4013
let i = 0
while (true) { i++ }
