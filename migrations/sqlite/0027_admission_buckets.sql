-- The call limits' token buckets that replicas share (admission.Shared).
-- Unused on SQLite, which one process serves (its limits are local); kept
-- so that both backends hold the same schema.
CREATE TABLE admission_buckets (
    key      TEXT PRIMARY KEY,
    tokens   REAL NOT NULL,
    granted  REAL NOT NULL,
    at       TIMESTAMP NOT NULL,
    full_at  TIMESTAMP NOT NULL
);
