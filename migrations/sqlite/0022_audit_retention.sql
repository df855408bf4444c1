-- Audit that lives for years (issue 19). SQLite has no partitions:
-- retention deletes old rows in bounded batches (audit.Store.Retain), by
-- this index on time.
CREATE INDEX audit_log_at ON audit_log (at, id);
-- An index for every filter the API offers, in the (at, id) keyset order
-- pages are read in: by agent, by user (actor or subject).
CREATE INDEX audit_log_tenant_agent_at ON audit_log (tenant_id, agent_id, at DESC, id DESC);
CREATE INDEX audit_log_tenant_actor_at ON audit_log (tenant_id, actor, at DESC, id DESC);
CREATE INDEX audit_log_tenant_subject_at ON audit_log (tenant_id, subject, at DESC, id DESC);

-- Per-tenant usage, counted as rows are written (audit.Store.Insert, in
-- the same transaction): agent calls per day (UTC, YYYY-MM-DD), instance,
-- agent and outcome. Usage summaries read this, never audit_log.
CREATE TABLE audit_usage (
    tenant_id  TEXT NOT NULL,
    day        TEXT NOT NULL,
    instance   TEXT NOT NULL,
    agent_id   TEXT NOT NULL,
    outcome    TEXT NOT NULL,
    calls      BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, day, instance, agent_id, outcome)
);
CREATE INDEX audit_usage_day ON audit_usage (day, tenant_id);
INSERT INTO audit_usage (tenant_id, day, instance, agent_id, outcome, calls)
    SELECT tenant_id, substr(at, 1, 10), instance, agent_id, outcome, count(*)
    FROM audit_log WHERE NOT (tool IN ('members', 'admin') AND caller_id = '')
    GROUP BY 1, 2, 3, 4, 5;

-- A tenant's own audit retention, in days, shorter than the operator's
-- (--audit-retention-days); a tenant without a row keeps the operator's.
CREATE TABLE audit_retention (
    tenant_id  TEXT PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
    days       INTEGER NOT NULL CHECK (days > 0)
);
