-- Tenants (workspaces): opaque immutable id, unique human slug.
CREATE TABLE tenants (
    id         TEXT PRIMARY KEY,
    slug       TEXT NOT NULL UNIQUE,
    name       TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL
);

-- App instances: a tenant's installation of a connector. Field values live
-- in secrets (owner 'instance:<id>'), one row per value.
CREATE TABLE instances (
    id                TEXT PRIMARY KEY,
    tenant_id         TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    slug              TEXT NOT NULL,
    connector_id      TEXT NOT NULL,
    connector_version TEXT NOT NULL,
    auth_mode         TEXT NOT NULL,
    agents            TEXT NOT NULL,
    revision          INTEGER NOT NULL,
    created_at        TIMESTAMP NOT NULL,
    updated_at        TIMESTAMP NOT NULL,
    UNIQUE (tenant_id, slug)
);

-- Callers: credentials a tenant issues to agent platforms, cron jobs and
-- knowledge sync. Only the SHA-256 of the token is kept.
CREATE TABLE callers (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    kind       TEXT NOT NULL,
    trusted    BOOLEAN NOT NULL,
    agent_id   TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    created_at TIMESTAMP NOT NULL,
    revoked_at TIMESTAMP
);
CREATE INDEX callers_tenant ON callers (tenant_id);

-- Secrets: one encrypted scalar per row. tenant_id is '' for platform rows.
-- The ciphertext is bound to (tenant_id, owner, name) by AES-GCM associated
-- data and names the key that sealed it.
CREATE TABLE secrets (
    tenant_id  TEXT NOT NULL,
    owner      TEXT NOT NULL,
    name       TEXT NOT NULL,
    key_id     TEXT NOT NULL,
    ciphertext BLOB NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    PRIMARY KEY (tenant_id, owner, name)
);

-- Operator tokens for the admin API, stored as SHA-256 hashes.
CREATE TABLE operator_tokens (
    id         TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    created_at TIMESTAMP NOT NULL
);
