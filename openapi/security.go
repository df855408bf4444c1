package openapi

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/switchboardhq/switchboard/registry"
)

// effectiveSecurity is the security requirement an operation is under:
// its own, or else the description's; nil when neither says.
func effectiveSecurity(doc *openapi3.T, op *openapi3.Operation) *openapi3.SecurityRequirements {
	if op.Security != nil {
		return op.Security
	}
	if doc.Security != nil {
		return &doc.Security
	}
	return nil
}

// security is an operation's Operation.Security: the alternatives of its
// effective requirement that name only declared schemes, each the
// scheme names sorted; an empty requirement (or "security: []") accepts
// a call without credentials. Nil when the description says nothing.
func (c *compiler) security(op *openapi3.Operation) [][]string {
	reqs := effectiveSecurity(c.doc, op)
	if reqs == nil {
		return nil
	}
	var declared openapi3.SecuritySchemes
	if c.doc.Components != nil {
		declared = c.doc.Components.SecuritySchemes
	}
	if len(*reqs) == 0 {
		return [][]string{{}}
	}
	var out [][]string
	for _, req := range *reqs {
		alt := []string{}
		ok := true
		for _, name := range sortedKeys(req) {
			if s := declared[name]; s == nil || s.Value == nil {
				ok = false
				break
			}
			alt = append(alt, name)
		}
		if ok {
			out = append(out, alt)
		}
	}
	return out
}

// namedScheme is a security scheme with its name in the description.
type namedScheme struct {
	name string
	s    *openapi3.SecurityScheme
}

// usedSchemes are the declared schemes that some operation's effective
// security names (all declared ones when no operation names any), that
// Switchboard can send, best first (schemeRank, then name).
func usedSchemes(doc *openapi3.T) []namedScheme {
	var declared openapi3.SecuritySchemes
	if doc.Components != nil {
		declared = doc.Components.SecuritySchemes
	}
	named := map[string]bool{}
	if doc.Paths != nil {
		for _, item := range doc.Paths.Map() {
			if item == nil {
				continue
			}
			for _, op := range item.Operations() {
				if op == nil {
					continue
				}
				if reqs := effectiveSecurity(doc, op); reqs != nil {
					for _, req := range *reqs {
						for name := range req {
							named[name] = true
						}
					}
				}
			}
		}
	}
	var out []namedScheme
	for _, name := range sortedKeys(declared) {
		r := declared[name]
		if r == nil || r.Value == nil || schemeRank(r.Value) >= 5 || (len(named) > 0 && !named[name]) {
			continue
		}
		out = append(out, namedScheme{name, r.Value})
	}
	slices.SortStableFunc(out, func(a, b namedScheme) int { return cmp.Compare(schemeRank(a.s), schemeRank(b.s)) })
	return out
}

// schemeModes are the auth modes that can send a scheme's credential.
func schemeModes(s *openapi3.SecurityScheme) []string {
	switch schemeRank(s) {
	case 0:
		return []string{registry.ModeAPIKey, registry.ModeAccessToken}
	case 3:
		return []string{registry.ModeAccessToken, registry.ModeOAuth}
	}
	return []string{registry.ModeAPIKey}
}

// authFields derives the manifest's auth section and the fields holding
// credentials from the schemes the operations accept (usedSchemes): the
// best one is the mode apiKey's credential (a bearer token, else an API
// key in a header, in a query or a cookie, else basic credentials), every
// mode some scheme allows is offered, and when the operations accept
// different schemes each is listed in Auth.Schemes with its own field,
// so that each operation is sent the credential it accepts.
//
// An OAuth 2 connector names the platform provider by slug only (the
// connector id, lower case): endpoints and client ids live in the
// platform's provider registry, never in a manifest.
func authFields(doc *openapi3.T, prefix, provider string) (registry.Auth, []registry.Field) {
	used := usedSchemes(doc)
	if len(used) == 0 {
		return registry.Auth{Type: "none", Modes: []string{}}, nil
	}
	token := prefix + "_TOKEN"
	var au registry.Auth
	var fields []registry.Field
	declared := map[string]bool{}
	field := func(f registry.Field) {
		if !declared[f.Name] {
			declared[f.Name] = true
			fields = append(fields, f)
		}
	}
	// unique is a field name not yet declared, from the scheme's name.
	unique := func(base string) string {
		n := base
		for i := 2; declared[n]; i++ {
			n = fmt.Sprintf("%s_%d", base, i)
		}
		return n
	}
	var schemes []registry.Scheme
	for _, u := range used {
		s := u.s
		for _, m := range schemeModes(s) {
			if !slices.Contains(au.Modes, m) {
				au.Modes = append(au.Modes, m)
			}
		}
		sc := registry.Scheme{Name: u.name}
		switch schemeRank(s) {
		case 0:
			sc.Kind, sc.Delivery, sc.Param, sc.Format, sc.Field = registry.SchemeBearer, "header", "Authorization", "Bearer {SECRET:"+token+"}", token
			field(registry.Field{Name: token, Label: "API token", Secret: true, Description: schemeDesc(s, "The API key or token, sent as a bearer token.")})
			au.TokenField = token
		case 1, 2:
			name := prefix + "_API_KEY"
			if au.Field != "" {
				name = unique(prefix + "_" + strings.ToUpper(snake(u.name, 40)))
			}
			sc.Kind, sc.Delivery, sc.Param, sc.Field = registry.SchemeAPIKey, s.In, s.Name, name
			label := "API key"
			if name != prefix+"_API_KEY" {
				label += " (" + truncate(u.name, 40) + ")"
			}
			field(registry.Field{Name: name, Label: label, Secret: true, Description: schemeDesc(s, "The API key, sent in the "+s.In+" "+s.Name+".")})
		case 3:
			sc.Kind = registry.SchemeOAuth2
			au.TokenField = token
			au.Scopes = append(au.Scopes, oauthScopes(s)...)
			field(registry.Field{Name: token, Label: "Access token", Secret: true, Description: "An OAuth access token (mode accessToken); mode oauth obtains one per user instead."})
		default:
			name := prefix + "_BASIC_CREDENTIALS"
			if au.Field != "" {
				name = unique(prefix + "_" + strings.ToUpper(snake(u.name, 40)))
			}
			sc.Kind, sc.Delivery, sc.Param, sc.Format, sc.Field = registry.SchemeBasic, "header", "Authorization", "Basic {SECRET:"+name+"}", name
			field(registry.Field{Name: name, Label: "Basic credentials", Secret: true,
				Description: schemeDesc(s, "The base64 encoding of user:password, as HTTP basic authentication sends it.")})
		}
		if au.Field == "" && sc.Kind != registry.SchemeOAuth2 {
			// The best scheme with a field of its own is mode apiKey's.
			au.Field, au.Delivery, au.Param, au.Format = sc.Field, sc.Delivery, sc.Param, sc.Format
		}
		schemes = append(schemes, sc)
	}
	switch {
	case slices.Contains(au.Modes, registry.ModeOAuth):
		au.Type, au.Provider = "oauth2", provider
		slices.Sort(au.Scopes)
		au.Scopes = slices.Compact(au.Scopes)
	case schemeRank(used[0].s) == 4:
		au.Type = "password"
	default:
		au.Type = "api_key"
	}
	if len(schemes) > 1 {
		au.Schemes = schemes
	}
	// A field is required when every mode offered needs it.
	for i := range fields {
		req := true
		for _, m := range au.Modes {
			req = req && (m == registry.ModeAPIKey && fields[i].Name == au.Field || m == registry.ModeAccessToken && fields[i].Name == au.TokenField)
		}
		fields[i].Required = req
	}
	return au, fields
}
