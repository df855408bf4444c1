-- Platform OAuth provider registry (oauthCentral, and the default endpoints
-- of oauth). Every value of a provider (authorize, token and revoke URLs,
-- scopes, extra authorize parameters, the central client id and secret) is
-- its own platform-scope secret row (tenant_id '', owner 'provider:<slug>');
-- this table only lists the providers.
CREATE TABLE oauth_providers (
    slug       TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    revision   BIGINT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);

-- OAuth authorization-code flows in progress: single-use state (kept as its
-- SHA-256), bound to tenant, instance and user, with the token endpoint
-- recorded when the flow started. The PKCE verifier is a secret row (owner
-- 'oauthstate:<state_hash>').
CREATE TABLE oauth_states (
    state_hash    TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    tenant_slug   TEXT NOT NULL,
    instance_id   TEXT NOT NULL,
    instance_slug TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    mode          TEXT NOT NULL,
    fingerprint   TEXT NOT NULL,
    token_url     TEXT NOT NULL,
    redirect_uri  TEXT NOT NULL,
    binding_hash  TEXT NOT NULL,
    expires_at    TIMESTAMP NOT NULL,
    created_at    TIMESTAMP NOT NULL
);
CREATE INDEX oauth_states_expires ON oauth_states (expires_at);

-- User grants and the token cache: one row per fingerprint of (tenant,
-- instance, client id, normalised scopes, user, mode). The access and
-- refresh tokens are secret rows (owner 'grant:<instance_id>:<user_id>',
-- names '<fingerprint>:access_token' and '<fingerprint>:refresh_token').
-- The row is what a refresh locks (SELECT ... FOR UPDATE).
CREATE TABLE auth_grants (
    tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    fingerprint TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    mode        TEXT NOT NULL,
    status      TEXT NOT NULL,
    version     BIGINT NOT NULL,
    expires_at  TIMESTAMP NOT NULL,
    created_at  TIMESTAMP NOT NULL,
    updated_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (tenant_id, fingerprint)
);
CREATE INDEX auth_grants_user ON auth_grants (tenant_id, instance_id, user_id);

-- Audit: one row per agent call. Never arguments, never secrets.
CREATE TABLE audit_log (
    id          TEXT PRIMARY KEY,
    at          TIMESTAMP NOT NULL,
    tenant_id   TEXT NOT NULL,
    instance    TEXT NOT NULL,
    caller_id   TEXT NOT NULL,
    agent_id    TEXT NOT NULL,
    actor       TEXT NOT NULL,
    subject     TEXT NOT NULL,
    tool        TEXT NOT NULL,
    action      TEXT NOT NULL,
    outcome     TEXT NOT NULL,
    status      INTEGER NOT NULL,
    latency_us  BIGINT NOT NULL
);
CREATE INDEX audit_log_tenant_at ON audit_log (tenant_id, at DESC, id DESC);
