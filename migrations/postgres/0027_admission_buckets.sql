-- The call limits' token buckets that replicas share (admission.Shared):
-- one row per limited key (scope and ids), the tokens it held at `at`;
-- each replica leases tokens from it in batches, so that a rate limit
-- holds across replicas. `granted` is what the last lease took; at
-- `full_at` the bucket is full again, like a missing row, and the row may
-- be deleted.
CREATE TABLE admission_buckets (
    key      TEXT PRIMARY KEY,
    tokens   DOUBLE PRECISION NOT NULL,
    granted  DOUBLE PRECISION NOT NULL,
    at       TIMESTAMPTZ NOT NULL,
    full_at  TIMESTAMPTZ NOT NULL
);
