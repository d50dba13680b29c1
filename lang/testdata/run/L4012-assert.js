// fails: L4012
assert(1 === 2, "one is not two")
