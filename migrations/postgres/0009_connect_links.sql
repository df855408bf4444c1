-- Connect links: a short-lived, single-use URL that lets a person connect
-- their own account to a per-user OAuth instance from a browser, without a
-- caller credential. Only the SHA-256 of the link's token is kept; a link
-- is spent (used_at) when the flow starts, by the user it names, on any
-- replica.
CREATE TABLE connect_links (
    token_hash    TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    tenant_slug   TEXT NOT NULL,
    instance_id   TEXT NOT NULL,
    instance_slug TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    created_by    TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    expires_at    TIMESTAMPTZ NOT NULL,
    used_at       TIMESTAMPTZ
);
CREATE INDEX connect_links_expires ON connect_links (expires_at);
