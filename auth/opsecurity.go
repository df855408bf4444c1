package auth

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
)

// operationCredentials send each operation the credential it accepts
// (registry.Operation.Security), when the connector lists its security
// schemes (registry.Auth.Schemes): the mode's own credential for the
// schemes it satisfies (a bearer token for oauth2 and bearer schemes in
// the token modes), and the instance's value of a scheme's own field for
// the others. An operation none of whose alternatives the instance can
// satisfy gets the mode's credential, so the upstream says what is
// missing; one that also accepts no credential gets none.
type operationCredentials struct {
	primary registry.Applier
	// token is set when the mode's credential is a bearer token.
	token bool
	// bearer, in mode apiKey, sends the instance's token field as a
	// bearer token (for oauth2 schemes).
	bearer   registry.Applier
	schemes  map[string]registry.Scheme
	byScheme map[string]registry.Applier
}

// withSchemes wraps the mode's applier when the connector lists its
// security schemes; otherwise it returns it as it is.
func withSchemes(mode string, primary registry.Applier, in ModeInput) registry.Applier {
	m := in.Manifest
	if len(m.Auth.Schemes) == 0 || m.Type != registry.TypeOpenAPI {
		return primary
	}
	o := &operationCredentials{primary: primary, token: mode != registry.ModeAPIKey,
		schemes: map[string]registry.Scheme{}, byScheme: map[string]registry.Applier{}}
	if !o.token && m.Auth.TokenField != "" {
		if v, ok := in.Fields[m.Auth.TokenField]; ok && !v.IsZero() {
			o.bearer = &keyApplier{delivery: DeliveryHeader, param: "Authorization", parts: []part{{text: "Bearer "}, {secret: v, isSec: true}}}
		}
	}
	for _, s := range m.Auth.Schemes {
		o.schemes[s.Name] = s
		if s.Field == "" || s.Param == "" {
			continue
		}
		v, ok := in.Fields[s.Field]
		if !ok || v.IsZero() {
			continue
		}
		parts := []part{{secret: v, isSec: true}}
		if s.Format != "" {
			p, err := parseFormat(m, s.Format, in.Fields)
			if err != nil {
				continue
			}
			parts = p
		}
		delivery := s.Delivery
		if delivery == "" {
			delivery = DeliveryHeader
		}
		o.byScheme[s.Name] = &keyApplier{delivery: delivery, param: s.Param, parts: parts}
	}
	if _, ok := primary.(Rejecter); ok {
		return &rejectingOperationCredentials{o}
	}
	return o
}

// Apply implements registry.Applier: the mode's credential.
func (o *operationCredentials) Apply(req *http.Request) error { return o.primary.Apply(req) }

// ApplyOperation implements registry.OperationApplier.
func (o *operationCredentials) ApplyOperation(op *registry.Operation, req *http.Request) error {
	if op == nil || op.Security == nil {
		return o.primary.Apply(req)
	}
	anonymous := false
	for _, alt := range op.Security {
		if len(alt) == 0 {
			anonymous = true
			continue
		}
		var use []registry.Applier
		for _, name := range alt {
			a := o.satisfy(name)
			if a == nil {
				use = nil
				break
			}
			use = append(use, a)
		}
		if use == nil {
			continue
		}
		for _, a := range use {
			if err := a.Apply(req); err != nil {
				return err
			}
		}
		return nil
	}
	if anonymous {
		return nil
	}
	return o.primary.Apply(req)
}

// satisfy returns the applier that sends the scheme's credential, or nil.
func (o *operationCredentials) satisfy(name string) registry.Applier {
	s, ok := o.schemes[name]
	if !ok {
		return nil
	}
	switch s.Kind {
	case registry.SchemeOAuth2:
		if o.token {
			return o.primary
		}
		return o.bearer
	case registry.SchemeBearer:
		if o.token {
			return o.primary
		}
	}
	return o.byScheme[name]
}

// Secrets implements SecretHolder: every credential that may be sent.
func (o *operationCredentials) Secrets() []secrets.Secret {
	var out []secrets.Secret
	if h, ok := o.primary.(SecretHolder); ok {
		out = append(out, h.Secrets()...)
	}
	if h, ok := o.bearer.(SecretHolder); ok {
		out = append(out, h.Secrets()...)
	}
	for _, a := range o.byScheme {
		if h, ok := a.(SecretHolder); ok {
			out = append(out, h.Secrets()...)
		}
	}
	return out
}

// Format implements fmt.Formatter without any credential.
func (o *operationCredentials) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "auth.operationCredentials{%d schemes %s}", len(o.schemes), secrets.Redacted)
}

// LogValue implements slog.LogValuer.
func (o *operationCredentials) LogValue() slog.Value {
	return slog.GroupValue(slog.Int("schemes", len(o.schemes)), slog.String("value", secrets.Redacted))
}

// rejectingOperationCredentials are operationCredentials whose mode's
// credential is a token the upstream may refuse (Rejecter).
type rejectingOperationCredentials struct{ *operationCredentials }

// Reject implements Rejecter.
func (r *rejectingOperationCredentials) Reject(ctx context.Context) {
	r.primary.(Rejecter).Reject(ctx)
}
