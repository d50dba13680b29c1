// refused: L1010
const x = 1
switch (x) {
  case 1:
    log(1)
  case 2:
    break
}
