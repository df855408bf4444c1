-- The platform operator's browser door to the console. An operator
-- sign-in link is minted with an operator token (the API) or on the store
-- (the CLI), is single use and short-lived; only the SHA-256 of its token
-- is kept. Opening it and confirming starts an operator session: a
-- server-side row with no tenant, only the SHA-256 of the cookie's token,
-- the same idle (last_seen_at) and absolute (expires_at) expiry as
-- members' sessions, and revocable.
CREATE TABLE operator_sign_in_links (
    id         TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    created_by TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    used_at    TIMESTAMPTZ
);

CREATE TABLE operator_sessions (
    id           TEXT PRIMARY KEY,
    link_id      TEXT NOT NULL REFERENCES operator_sign_in_links(id) ON DELETE CASCADE,
    token_hash   TEXT NOT NULL UNIQUE,
    created_at   TIMESTAMPTZ NOT NULL,
    last_seen_at TIMESTAMPTZ NOT NULL,
    expires_at   TIMESTAMPTZ NOT NULL,
    revoked_at   TIMESTAMPTZ
);
