package remotemgr

// RawRequest exposes the request builder, so tests can send requests the client never would.
func (c *Client) RawRequest(kind, op string) Request { return c.request(kind, op) }

// Hosted exposes a request carrying the current proof and epoch.
func (c *Client) Hosted(kind, op string) Request { return c.hosted(kind, op) }
