-- The OpenID Connect identity (issuer, subject) a member row is bound to,
-- set at the row's first OpenID Connect sign-in, and the one a session
-- was signed in with ('' for a one-time link). The tenant picker lets a
-- session switch only to rows bound to its own identity
-- (docs/console.md, "Tenant picker").
ALTER TABLE members ADD COLUMN oidc_issuer TEXT NOT NULL DEFAULT '';
ALTER TABLE members ADD COLUMN oidc_subject TEXT NOT NULL DEFAULT '';
CREATE INDEX members_oidc_identity ON members (oidc_issuer, oidc_subject);
ALTER TABLE member_sessions ADD COLUMN oidc_issuer TEXT NOT NULL DEFAULT '';
ALTER TABLE member_sessions ADD COLUMN oidc_subject TEXT NOT NULL DEFAULT '';
