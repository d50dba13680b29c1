package ledger

import "errors"

// ErrAgentNeedsLedger is returned by Mint for the agent profile: agent credentials are issued
// through a Ledger, so that each has a row that can revoke it.
var ErrAgentNeedsLedger = errors.New("ledger: agent credentials are issued through the ledger so that each can be revoked")

// ErrClosed is returned by an operation on a closed Ledger.
var ErrClosed = errors.New("ledger: closed")
