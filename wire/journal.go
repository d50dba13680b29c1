package wire

// The workflow-run journal (SPEC §14.4): one subject per run, cotal.<space>.wfj.<runId>, in the
// WFJ_<space> stream. Its records are ordinals from 0: an activation record first (a holder
// taking the run with its fencing token), then steps; every later activation records how much of
// the journal its holder replayed.
