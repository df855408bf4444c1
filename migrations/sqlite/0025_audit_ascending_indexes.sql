-- The audit log's per-tenant indexes in ascending order (issue 13). Declared
-- (..., at DESC, id DESC), every new row (the newest time) lands at the left
-- end of its tenant's range, and SQLite splits the page there on every
-- insert; in ascending order it appends at the right end. SQLite reads an
-- ascending index backwards for the listings' ORDER BY at DESC, id DESC, so
-- the queries and their plans stay as they were. Measured on 200,000 rows:
-- CPU per inserted row 22 -> 15.5 us.
DROP INDEX audit_log_tenant_at;
CREATE INDEX audit_log_tenant_at ON audit_log (tenant_id, at, id);
DROP INDEX audit_log_tenant_instance_at;
CREATE INDEX audit_log_tenant_instance_at ON audit_log (tenant_id, instance, at, id);
DROP INDEX audit_log_tenant_agent_at;
CREATE INDEX audit_log_tenant_agent_at ON audit_log (tenant_id, agent_id, at, id);
DROP INDEX audit_log_tenant_actor_at;
CREATE INDEX audit_log_tenant_actor_at ON audit_log (tenant_id, actor, at, id);
DROP INDEX audit_log_tenant_subject_at;
CREATE INDEX audit_log_tenant_subject_at ON audit_log (tenant_id, subject, at, id);
