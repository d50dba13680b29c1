// refused: L1020
import fs from "fs"
