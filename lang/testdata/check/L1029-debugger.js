// refused: L1029
debugger
