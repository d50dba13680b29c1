// fails: L4021
const r = {}
r.then = () => 1
