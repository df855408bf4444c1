package gateway

// HoldsCredentials reports whether t keeps decrypted field values.
func (t *Target) HoldsCredentials() bool { return t.held.Load() != nil }
