-- Tenant API keys: credentials for automation (provisioning, CI) that act
-- in one tenant with a role (admin or member). Only the SHA-256 of the key
-- is stored. user_id is the member a member-role key acts as ('' when
-- none); created_by names who created it (a member's user id, an API
-- key's id, or 'operator'). last_used_at is updated at most once a minute.
CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    role         TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    created_by   TEXT NOT NULL,
    token_hash   TEXT NOT NULL UNIQUE,
    created_at   TIMESTAMP NOT NULL,
    expires_at   TIMESTAMP,
    last_used_at TIMESTAMP,
    revoked_at   TIMESTAMP
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id);
