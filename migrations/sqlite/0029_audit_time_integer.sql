-- The audit log's time as an integer (issue 13): nanoseconds since the
-- Unix epoch, UTC, instead of the driver's text ("2006-01-02
-- 15:04:05.999999999+00:00", up to 35 bytes). The time is in the key and
-- in every index of the table, so each row was about a quarter larger in
-- its four B-trees than it needs to be, and the pages a batch dirties (its
-- WAL writes, the checkpoints that copy them back, the page splits) grow
-- with it. Stored times keep their nanoseconds: a row replayed from the
-- journal or the spool after this migration has the key of its first
-- write, so it is still written once. audit.Store binds and reads the
-- integer (audit.atArg, audit.atColumn); PostgreSQL is unchanged.
--
-- The text is converted exactly: the whole seconds with their offset by
-- unixepoch, the fraction's digits (up to nine) as nanoseconds.
CREATE TABLE audit_log_new (
    id          TEXT NOT NULL,
    at          INTEGER NOT NULL,
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
    PRIMARY KEY (tenant_id, at, id)
) WITHOUT ROWID;
INSERT INTO audit_log_new (id, at, tenant_id, instance, caller_id, agent_id, actor, subject, tool, action, outcome, status, latency_us)
    SELECT id,
        CASE WHEN typeof(at) = 'integer' THEN at
        ELSE unixepoch(substr(body, 1, 19) || tz) * 1000000000
            + CASE WHEN substr(body, 20, 1) = '.' THEN CAST(substr(substr(body, 21) || '000000000', 1, 9) AS INTEGER) ELSE 0 END
        END,
        tenant_id, instance, caller_id, agent_id, actor, subject, tool, action, outcome, status, latency_us
    FROM (SELECT *,
            CASE WHEN substr(at, -6, 1) IN ('+', '-') THEN substr(at, 1, length(at) - 6) ELSE rtrim(at, 'Z') END AS body,
            CASE WHEN substr(at, -6, 1) IN ('+', '-') THEN substr(at, -6) ELSE '' END AS tz
        FROM audit_log)
    ORDER BY tenant_id, 2, id;
DROP TABLE audit_log;
ALTER TABLE audit_log_new RENAME TO audit_log;
CREATE INDEX audit_log_tenant_instance_at ON audit_log (tenant_id, instance, at, id);
CREATE INDEX audit_log_tenant_agent_at ON audit_log (tenant_id, agent_id, at, id);
CREATE INDEX audit_log_tenant_actor_at ON audit_log (tenant_id, actor, at, id);
CREATE INDEX audit_log_tenant_subject_at ON audit_log (tenant_id, subject, at, id) WHERE subject <> actor;
