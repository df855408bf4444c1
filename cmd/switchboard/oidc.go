package main

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/signin"
)

// OpenID Connect issuers are configured in one of two forms:
//
//   - one issuer: --oidc-issuer URL, --oidc-client-id ID and
//     SWITCHBOARD_OIDC_CLIENT_SECRET; its callback is
//     <public-url>/signin/oidc/callback;
//   - several: --oidc-issuer name=URL,name=URL, --oidc-client-id
//     name=ID,name=ID and SWITCHBOARD_OIDC_CLIENT_SECRET_<NAME> for each;
//     issuer name's callback is <public-url>/signin/oidc/callback/<name>.

// oidcSecretEnv is the environment variable of a named issuer's client
// secret.
func oidcSecretEnv(name string) string {
	return "SWITCHBOARD_OIDC_CLIENT_SECRET_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// namedPair splits a name=value item whose name is an issuer name; ok
// is false for anything else (a bare URL or id).
func namedPair(item string) (name, value string, ok bool) {
	name, value, ok = strings.Cut(item, "=")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	return name, value, ok && signin.ValidIssuerName(name)
}

// readOIDCSecrets reads the client secret of every named issuer.
func (c *config) readOIDCSecrets(getenv func(string) string) {
	for _, item := range splitList(c.OIDCIssuer) {
		if name, _, ok := namedPair(item); ok {
			if v := getenv(oidcSecretEnv(name)); v != "" {
				if c.oidcSecrets == nil {
					c.oidcSecrets = map[string]secrets.Secret{}
				}
				c.oidcSecrets[name] = secrets.New(v)
			}
		}
	}
}

// oidcIssuers parses the OpenID Connect settings into the issuers people
// sign in with, in the order given (the first is the default).
func (c *config) oidcIssuers() ([]signin.OIDCIssuer, error) {
	items := splitList(c.OIDCIssuer)
	if len(items) == 0 {
		if c.OIDCClientID != "" {
			return nil, errors.New("--oidc-client-id is set but --oidc-issuer is not")
		}
		return nil, nil
	}
	if _, _, named := namedPair(items[0]); len(items) == 1 && !named {
		// One issuer, the original form.
		if c.OIDCClientID == "" {
			return nil, errors.New("OpenID Connect sign-in needs both --oidc-issuer and --oidc-client-id")
		}
		if _, _, named := namedPair(c.OIDCClientID); named {
			return nil, errors.New("--oidc-client-id is a name=id pair but --oidc-issuer is a bare URL: name the issuer (--oidc-issuer name=URL) or give a bare client id")
		}
		if err := checkIssuerURL("", items[0]); err != nil {
			return nil, err
		}
		return []signin.OIDCIssuer{{Issuer: items[0], ClientID: c.OIDCClientID, ClientSecret: c.OIDCClientSecret}}, nil
	}
	ids := map[string]string{}
	for _, item := range splitList(c.OIDCClientID) {
		name, id, ok := namedPair(item)
		if !ok || id == "" {
			return nil, fmt.Errorf("--oidc-client-id: %q is not name=id (with several issuers, each issuer's client id is given by its name)", item)
		}
		ids[name] = id
	}
	var out []signin.OIDCIssuer
	envs := map[string]string{}
	for _, item := range items {
		name, u, ok := namedPair(item)
		if !ok {
			return nil, fmt.Errorf("--oidc-issuer: %q is not name=URL (with several issuers each is named: letters, digits, - and _)", item)
		}
		if other, dup := envs[oidcSecretEnv(name)]; dup {
			return nil, fmt.Errorf("--oidc-issuer: the issuer names %q and %q are the same name", other, name)
		}
		envs[oidcSecretEnv(name)] = name
		if err := checkIssuerURL(name, u); err != nil {
			return nil, err
		}
		id, ok := ids[name]
		if !ok {
			return nil, fmt.Errorf("--oidc-client-id has no client id of issuer %q (add %s=<client id>)", name, name)
		}
		delete(ids, name)
		out = append(out, signin.OIDCIssuer{Name: name, Issuer: u, ClientID: id, ClientSecret: c.oidcSecrets[name]})
	}
	if len(ids) > 0 {
		var names []string
		for n := range ids {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, fmt.Errorf("--oidc-client-id names issuers that --oidc-issuer does not: %s", strings.Join(names, ", "))
	}
	return out, nil
}

func checkIssuerURL(name, u string) error {
	if p, err := url.Parse(u); err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
		if name != "" {
			return fmt.Errorf("--oidc-issuer: issuer %s's URL %q must be an absolute URL", name, u)
		}
		return fmt.Errorf("--oidc-issuer %q must be an absolute URL", u)
	}
	return nil
}

// oidcSecretsShown is the start-up printout of the client secrets: set or
// unset, per issuer when they are named.
func oidcSecretsShown(c *config) string {
	issuers, err := c.oidcIssuers()
	if err != nil || len(issuers) == 0 || issuers[0].Name == "" {
		if c.OIDCClientSecret.IsZero() {
			return "unset"
		}
		return "set"
	}
	var parts []string
	for _, i := range issuers {
		state := "unset"
		if !i.ClientSecret.IsZero() {
			state = "set"
		}
		parts = append(parts, i.Name+": "+state)
	}
	return strings.Join(parts, ", ")
}
