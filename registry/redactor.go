package registry

import (
	"github.com/switchboardhq/switchboard/secrets"
)

// Redactor is the one redactor, secrets.Redactor.
type Redactor = secrets.Redactor

// NewRedactor returns the redactor of an instance's secrets: every field m
// declares secret, and the credential fields of its auth block. Callers
// add the credentials auth puts in play (Redactor.WithSecrets).
func NewRedactor(m *Manifest, fields map[string]secrets.Secret) *Redactor {
	var values []string
	for name, v := range fields {
		f, declared := m.Field(name)
		if !(declared && f.Secret) && name != m.Auth.Field && name != m.Auth.TokenField {
			continue
		}
		values = append(values, v.Reveal())
	}
	return secrets.NewRedactor(values...)
}
