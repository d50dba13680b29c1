package oidc

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"time"
)

// maxNumericDate is 9999-12-31T23:59:59Z, the largest date accepted in a claim.
const maxNumericDate = 253402300799

// numericDate is a JWT NumericDate (RFC 7519 §2): seconds since the epoch, possibly fractional.
// Only a JSON number is accepted: not a string, not null.
type numericDate struct {
	t   time.Time
	set bool
}

// UnmarshalJSON implements json.Unmarshaler.
func (n *numericDate) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
		return errors.New("date is not a JSON number")
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > maxNumericDate {
		return errors.New("date is out of range")
	}
	sec, frac := math.Modf(f)
	n.t = time.Unix(int64(sec), int64(frac*1e9))
	n.set = true
	return nil
}

// audience is the aud claim: a single string or an array of strings (RFC 7519 §4.1.3).
type audience []string

// UnmarshalJSON implements json.Unmarshaler.
func (a *audience) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil && len(b) > 0 && b[0] == '"' {
		*a = audience{one}
		return nil
	}
	var many []string
	if len(b) == 0 || b[0] != '[' {
		return errors.New("aud is neither a string nor an array")
	}
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("aud array holds a non-string")
	}
	*a = many
	return nil
}

// idClaims are the claims of an ID token this package reads.
type idClaims struct {
	Iss *string     `json:"iss"`
	Sub *string     `json:"sub"`
	Aud *audience   `json:"aud"`
	Azp *string     `json:"azp"`
	Exp numericDate `json:"exp"`
	Iat numericDate `json:"iat"`
	Nbf numericDate `json:"nbf"`
	// Display names are optional and informational: a provider that sends one as a non-string
	// must not make the token fail, so they are read raw.
	PreferredUsername json.RawMessage `json:"preferred_username"`
	Name              json.RawMessage `json:"name"`
	Email             json.RawMessage `json:"email"`
}

// displayName returns the first of preferred_username, name and email that is a non-empty
// string, or "".
func (c *idClaims) displayName() string {
	for _, raw := range []json.RawMessage{c.PreferredUsername, c.Name, c.Email} {
		var s string
		if len(raw) > 0 && json.Unmarshal(raw, &s) == nil && s != "" {
			return s
		}
	}
	return ""
}
