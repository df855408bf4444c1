-- The changes replicas invalidate their caches by, numbered: the NOTIFY
-- carries the sequence, and a listener that reconnects reads the changes
-- it missed since the last one it heard instead of emptying its caches.
-- Rows older than an hour are pruned.
CREATE TABLE change_log (
    seq        BIGSERIAL PRIMARY KEY,
    payload    TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
