// refused: L1008
function f() {
  return
    42
}
log(f())
