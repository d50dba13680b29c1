package remotemgr

// RawRequest exposes the request builder, so tests can send requests the client never would.
func (c *Client) RawRequest(kind, op string) Request { return c.request(kind, op) }

// Hosted exposes a request carrying the current proof and epoch.
func (c *Client) Hosted(kind, op string) Request { return c.hosted(kind, op) }

// Epoch returns the epoch the manager serves at, once activated.
func (c *Client) Epoch() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// ContractArtifacts are the digests an activation registers: the manager contract's artifacts.
func ContractArtifacts() ([]string, error) { return managerArtifacts() }
