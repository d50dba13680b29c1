// refused: L1024
return 1
