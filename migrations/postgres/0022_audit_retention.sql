-- Audit that lives for years (issue 19).
--
-- audit_log becomes a table partitioned by month on at, so that retention
-- drops whole months (audit.Store.Retain) instead of deleting rows. A
-- partitioned table's keys must hold the partition column: the primary key
-- is (id, at), which is as unique as id (an id is made from its row's
-- time). Rows of a month without its partition (none are expected:
-- Retain creates the current and next months' ahead) go to the default
-- partition, which retention empties by batched deletes.
ALTER TABLE audit_log RENAME TO audit_log_unpartitioned;
ALTER INDEX audit_log_pkey RENAME TO audit_log_unpartitioned_pkey;
CREATE TABLE audit_log (
    id          TEXT NOT NULL,
    at          TIMESTAMPTZ NOT NULL,
    tenant_id   TEXT NOT NULL,
    instance    TEXT NOT NULL,
    caller_id   TEXT NOT NULL,
    agent_id    TEXT NOT NULL,
    actor       TEXT NOT NULL,
    subject     TEXT NOT NULL,
    tool        TEXT NOT NULL,
    action      TEXT NOT NULL,
    outcome     TEXT NOT NULL,
    status      INTEGER NOT NULL,
    latency_us  BIGINT NOT NULL,
    PRIMARY KEY (id, at)
) PARTITION BY RANGE (at);
CREATE TABLE audit_log_default PARTITION OF audit_log DEFAULT;
-- One partition per month from the oldest row's through the next month,
-- named audit_log_pYYYYMM.
DO $$
DECLARE
    m    date := date_trunc('month', COALESCE((SELECT min(at) FROM audit_log_unpartitioned), now()) AT TIME ZONE 'UTC')::date;
    last date := (date_trunc('month', now() AT TIME ZONE 'UTC') + interval '1 month')::date;
BEGIN
    WHILE m <= last LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF audit_log FOR VALUES FROM (%L) TO (%L)',
            'audit_log_p' || to_char(m, 'YYYYMM'),
            (m::timestamp AT TIME ZONE 'UTC'), ((m + interval '1 month')::timestamp AT TIME ZONE 'UTC'));
        m := (m + interval '1 month')::date;
    END LOOP;
END $$;
INSERT INTO audit_log SELECT id, at, tenant_id, instance, caller_id, agent_id, actor, subject, tool, action,
    outcome, status, latency_us FROM audit_log_unpartitioned;
DROP TABLE audit_log_unpartitioned;
-- An index for every filter the API offers, in the (at, id) keyset order
-- pages are read in: the tenant's rows, by instance, by agent, by user
-- (actor or subject: two indexes, one per column).
CREATE INDEX audit_log_tenant_at ON audit_log (tenant_id, at DESC, id DESC);
CREATE INDEX audit_log_tenant_instance_at ON audit_log (tenant_id, instance, at DESC, id DESC);
CREATE INDEX audit_log_tenant_agent_at ON audit_log (tenant_id, agent_id, at DESC, id DESC);
CREATE INDEX audit_log_tenant_actor_at ON audit_log (tenant_id, actor, at DESC, id DESC);
CREATE INDEX audit_log_tenant_subject_at ON audit_log (tenant_id, subject, at DESC, id DESC);

-- Per-tenant usage, counted as rows are written (audit.Store.Insert, in
-- the same statement): agent calls per day (UTC, YYYY-MM-DD), instance,
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
-- The usage of every tenant over a span of days (the operator's summary).
CREATE INDEX audit_usage_day ON audit_usage (day, tenant_id);
INSERT INTO audit_usage (tenant_id, day, instance, agent_id, outcome, calls)
    SELECT tenant_id, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), instance, agent_id, outcome, count(*)
    FROM audit_log WHERE NOT (tool IN ('members', 'admin') AND caller_id = '')
    GROUP BY 1, 2, 3, 4, 5;

-- A tenant's own audit retention, in days, shorter than the operator's
-- (--audit-retention-days); a tenant without a row keeps the operator's.
CREATE TABLE audit_retention (
    tenant_id  TEXT PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
    days       INTEGER NOT NULL CHECK (days > 0)
);
