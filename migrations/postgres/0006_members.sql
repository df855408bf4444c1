-- Members: the people of a tenant, each with one role (owner, admin or
-- member). user_id is opaque and stable; email is unique in the tenant
-- (stored lower-cased).
CREATE TABLE members (
    tenant_id  TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    user_id    TEXT NOT NULL,
    email      TEXT NOT NULL,
    role       TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, user_id),
    UNIQUE (tenant_id, email)
);

-- Invitations and sign-in links: single use, expiring. Only the SHA-256 of
-- the link's token is kept. kind 'invite' creates the member when used;
-- 'login' signs an existing member in.
CREATE TABLE member_invitations (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    kind       TEXT NOT NULL,
    email      TEXT NOT NULL,
    role       TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    created_by TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    used_at    TIMESTAMPTZ
);
CREATE INDEX member_invitations_tenant ON member_invitations (tenant_id);

-- Sessions of signed-in members: only the SHA-256 of the cookie's token is
-- kept. A session ends at expires_at (absolute), after idle time without
-- use (last_seen_at), or when revoked; it is deleted with its member.
-- role is the member's role when the session was issued: a session whose
-- member's role changed since is rotated before it is used.
CREATE TABLE member_sessions (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    role         TEXT NOT NULL,
    token_hash   TEXT NOT NULL UNIQUE,
    created_at   TIMESTAMPTZ NOT NULL,
    last_seen_at TIMESTAMPTZ NOT NULL,
    expires_at   TIMESTAMPTZ NOT NULL,
    revoked_at   TIMESTAMPTZ,
    FOREIGN KEY (tenant_id, user_id) REFERENCES members (tenant_id, user_id) ON DELETE CASCADE
);
CREATE INDEX member_sessions_member ON member_sessions (tenant_id, user_id);
