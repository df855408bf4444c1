package connectflow

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/registry"
)

// Sessions tells who is signed in on a browser's request. The sign-in
// handler implements it (through the server assembly); the pages only
// consume it.
type Sessions interface {
	// SignedIn returns the member signed in on r and their tenant; ok is
	// false when no one is, err a session that is not valid.
	SignedIn(r *http.Request) (tenant switchboard.TenantID, user string, ok bool, err error)
	// SignInURL is where a browser signs in to tenantSlug and then comes
	// back to next (a path on this server).
	SignInURL(tenantSlug, next string) string
}

// Errors of connect links.
var (
	errLinkOtherUser = switchboard.E(switchboard.ErrForbidden, "connect_link_other_user",
		"this connect link was made for another person than the one signed in: sign out and open it signed in as that person, or ask for a link of your own")
	errLinkNotYours = switchboard.E(switchboard.ErrForbidden, "connect_link_forbidden",
		"only a trusted caller may make a connect link for another user; an untrusted caller makes links for its own user")
	errNoSignIn = switchboard.E(switchboard.ErrUnavailable, "signin_unavailable",
		"sign-in is not available on this server, so connect links cannot be opened")
)

// MintLink makes a connect link of the per-user OAuth instance
// instanceSlug for target (empty: the caller's own user). The requester is
// the caller of r's credential: a trusted caller may name any user it may
// name (a member or one of its external subjects), an untrusted one only
// its own user. Members mint through the admin API (MintFor).
func (f *Pages) MintLink(ctx context.Context, r *http.Request, tenantSlug, instanceSlug, target string) (*auth.ConnectLink, error) {
	// Who asks is known before anything of the instance is told.
	p, err := f.g.Authenticate(ctx, r, tenantSlug)
	if err != nil {
		return nil, err
	}
	createdBy := string(p.Caller.ID)
	if target != "" && target != p.UserID {
		if !p.Trusted {
			return nil, errLinkNotYours
		}
		p = p.WithTarget(target)
	}
	t, err := f.linkInstance(ctx, tenantSlug, instanceSlug)
	if err != nil {
		return nil, err
	}
	return f.mint(ctx, t, p, createdBy)
}

// MintFor makes a connect link of the per-user OAuth instance
// instanceSlug for user, who must be a member of the tenant, on behalf of
// createdBy (an admin API principal the API has authorized).
func (f *Pages) MintFor(ctx context.Context, tenantSlug, instanceSlug, user, createdBy string) (*auth.ConnectLink, error) {
	t, err := f.linkInstance(ctx, tenantSlug, instanceSlug)
	if err != nil {
		return nil, err
	}
	// A principal acting for user: the gateway checks membership.
	p := (&auth.Principal{Tenant: t.Tenant.ID, TenantSlug: t.Tenant.Slug, Trusted: true}).WithTarget(user)
	return f.mint(ctx, t, p, createdBy)
}

// linkInstance resolves the instance of a connect link: a per-user OAuth
// one.
func (f *Pages) linkInstance(ctx context.Context, tenantSlug, instanceSlug string) (*gateway.Target, error) {
	if f.oauth == nil {
		return nil, errNoOAuth
	}
	t, err := f.g.Resolve(ctx, tenantSlug, instanceSlug)
	if err != nil {
		return nil, err
	}
	if m := t.Instance.AuthMode; m != registry.ModeOAuth && m != registry.ModeOAuthCentral {
		return nil, switchboard.E(switchboard.ErrInvalid, "not_oauth",
			"this app instance does not use a per-user OAuth mode (oauth or oauthCentral): there is nothing to connect")
	}
	return t, nil
}

// mint makes the link of p's subject user on t. ModeInput checks that a
// user p names for another (a target) is a member or an external subject.
func (f *Pages) mint(ctx context.Context, t *gateway.Target, p *auth.Principal, createdBy string) (*auth.ConnectLink, error) {
	in, err := f.g.ModeInput(ctx, t, p)
	if err != nil {
		return nil, err
	}
	return f.oauth.MintConnectLink(ctx, auth.LinkTarget{Tenant: t.Tenant.ID, TenantSlug: t.Tenant.Slug,
		InstanceID: t.Instance.ID, InstanceSlug: t.Instance.Slug, User: in.Principal.Subject()}, createdBy)
}

// ServeLink serves a connect link (GET .../oauth/link?token=): a person
// signed in as the link's user starts the OAuth flow, and the link is
// spent; a person not signed in is sent to sign in and back; a person
// signed in as someone else is refused and the link stays unspent. Every
// answer but the redirects is a page without script.
func (f *Pages) ServeLink(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	tenantSlug, instanceSlug := r.PathValue("tenant"), r.PathValue("instance")
	log := gateway.RequestLogger(f.logger, w).With("tenant", tenantSlug, "instance", instanceSlug, "mode", "oauth")
	fail := func(err error) {
		gateway.LogError(log, "connect link refused", err)
		p := switchboard.ProblemOf(err)
		f.page(w, p.Status, "Not connected", "Nothing was connected: "+p.Detail.Message)
	}
	if f.oauth == nil {
		fail(errNoOAuth)
		return
	}
	token := r.URL.Query().Get("token")
	lt, err := f.oauth.ConnectLinkTarget(ctx, token)
	if err == nil && (lt.TenantSlug != tenantSlug || lt.InstanceSlug != instanceSlug) {
		err = auth.ErrLinkInvalid
	}
	if err != nil {
		fail(err)
		return
	}
	if f.sessions == nil {
		fail(errNoSignIn)
		return
	}
	tenant, user, ok, err := f.sessions.SignedIn(r)
	if err != nil || tenant != lt.Tenant {
		// A session that is not valid, or of another tenant, signs in
		// again.
		ok = false
	}
	if !ok {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		http.Redirect(w, r, f.sessions.SignInURL(tenantSlug, r.URL.RequestURI()), http.StatusFound)
		return
	}
	if user != lt.User {
		fail(errLinkOtherUser)
		return
	}
	t, err := f.g.Resolve(ctx, tenantSlug, instanceSlug)
	if err == nil && t.Instance.ID != lt.InstanceID {
		err = auth.ErrLinkInvalid
	}
	var in auth.ModeInput
	if err == nil {
		in, err = f.g.ModeInput(ctx, t, &auth.Principal{Tenant: lt.Tenant, TenantSlug: lt.TenantSlug, UserID: user})
	}
	var flow *auth.Flow
	if err == nil {
		flow, err = f.oauth.Connect(ctx, in)
	}
	// Spent once the flow is ready: of two tabs racing, one goes on.
	if err == nil {
		err = f.oauth.SpendConnectLink(ctx, token, user)
	}
	if err != nil {
		fail(err)
		return
	}
	f.setBinding(w, flow)
	w.Header().Set("Referrer-Policy", "no-referrer")
	log.Info("oauth flow started from a connect link")
	http.Redirect(w, r, flow.AuthorizeURL, http.StatusFound)
}

// setBinding sets the cookie that binds flow to this browser.
func (f *Pages) setBinding(w http.ResponseWriter, flow *auth.Flow) {
	http.SetCookie(w, &http.Cookie{
		Name: flow.CookieName, Value: flow.Binding, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: strings.HasPrefix(f.oauth.PublicURL(), "https://"), Expires: flow.ExpiresAt,
	})
	w.Header().Set("Cache-Control", "no-store")
}

// consoleURL returns the console's URL when it is an http(s) URL.
func consoleURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return ""
	}
	return u.String()
}
