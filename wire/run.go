package wire

// A workflow run's records (SPEC §14): run.<endpoint>.<runId>.{spec,status} in the records
// bucket. The status says whether the run is running and under whose lease.
