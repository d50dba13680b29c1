package mcptools

import "time"

// SetNudgeBackoff shortens the repeats of the channel nudge for a test; call it before Connect.
func (t *Tools) SetNudgeBackoff(d ...time.Duration) { t.push.backoff = d }
