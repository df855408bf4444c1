-- A tenant's own call limits (admission.Store): per scope (tenant,
-- instance, user) a concurrency, a rate and a burst, within the
-- operator's defaults; JSON of admission.Limits. No row: the defaults.
CREATE TABLE admission_limits (
    tenant_id   TEXT PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
    limits      TEXT NOT NULL,
    updated_at  TIMESTAMP NOT NULL
);
