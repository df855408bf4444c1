-- The audit log in fewer B-trees (issue 13): every row used to enter
-- eight (the rowid table, its TEXT primary key's index, audit_log_at for
-- retention, audit_log_tenant_at and the four filter indexes). The table
-- is now WITHOUT ROWID and clustered on (tenant_id, at, id), the order of
-- a tenant's listing, so the table itself is that listing's index (no
-- rowid table, no primary-key index, no audit_log_tenant_at), and
-- retention walks each tenant's range of it from its oldest row
-- (audit.Store.Retain) instead of a separate index on time. A replayed
-- row has the tenant and time of its first write, so the key still
-- writes each row once (PostgreSQL's is (id, at)).
--
-- The filter indexes keep their names and columns; the subject's now
-- holds only the rows whose subject is not their actor (a trusted caller
-- acting for a user). A user's listing reads the actor's index and this
-- one and merges them (audit.pageQuery; it used to walk the tenant's
-- rows, since SQLite did not combine the two indexes in order). A row
-- enters five B-trees, four when its subject is its actor (nearly all).
CREATE TABLE audit_log_new (
    id          TEXT NOT NULL,
    at          TIMESTAMP NOT NULL,
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
    SELECT id, at, tenant_id, instance, caller_id, agent_id, actor, subject, tool, action, outcome, status, latency_us
    FROM audit_log ORDER BY tenant_id, at, id;
DROP TABLE audit_log;
ALTER TABLE audit_log_new RENAME TO audit_log;
CREATE INDEX audit_log_tenant_instance_at ON audit_log (tenant_id, instance, at, id);
CREATE INDEX audit_log_tenant_agent_at ON audit_log (tenant_id, agent_id, at, id);
CREATE INDEX audit_log_tenant_actor_at ON audit_log (tenant_id, actor, at, id);
CREATE INDEX audit_log_tenant_subject_at ON audit_log (tenant_id, subject, at, id) WHERE subject <> actor;
