package wire

// The names and grant rows of the credentials a host issues beside a serving instance (SPEC
// §13.6, §13.9, §14): the goal writer's fact families and record keys, a workflow run's record
// keys and stores, the auth endpoint's retirement rail, a manager instance's transfer store. A
// builder here does not validate its tokens: the authority that mints a grant checks each
// coordinate (endpoint, instance, run id) first.
