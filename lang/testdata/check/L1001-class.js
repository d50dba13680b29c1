// refused: L1001
class Plan { constructor(days) { this.days = days } }
