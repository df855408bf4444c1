-- The changes replicas invalidate their caches by (Postgres only: the
-- embedded store serves one process and never writes it; kept for the
-- same schema on both stores).
CREATE TABLE change_log (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    payload    TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP
);
