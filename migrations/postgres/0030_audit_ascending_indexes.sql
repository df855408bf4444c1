-- PostgreSQL's audit indexes become ascending, as SQLite's did in 0025.
--
-- A new row is the newest of its tenant (and of its instance, agent, actor
-- and subject): in a descending index it goes to the left end of that
-- range, where every page split halves a page and the next rows fill the
-- left half again, so the indexes were half empty and each insert
-- descended from the root. Ascending, the row goes to the right end of its
-- range: B-tree inserts at the rightmost page skip the descent, and
-- PostgreSQL splits a page left full when rows arrive in ascending order
-- (nbtree's "split after new tuple"). The PostgreSQL backend's CPU per
-- audit row fell by about a third (docs/performance.md, Steps). Listings
-- read the same indexes backwards for the newest-first order (an Index
-- Scan Backward: no sort), and a cursor to newer rows forwards.
--
-- The primary key (id, at) stays: ids are time-ordered, so it is appended
-- to already, and a replayed row is recognised by it.
DROP INDEX audit_log_tenant_at;
DROP INDEX audit_log_tenant_instance_at;
DROP INDEX audit_log_tenant_agent_at;
DROP INDEX audit_log_tenant_actor_at;
DROP INDEX audit_log_tenant_subject_at;
CREATE INDEX audit_log_tenant_at ON audit_log (tenant_id, at, id);
CREATE INDEX audit_log_tenant_instance_at ON audit_log (tenant_id, instance, at, id);
CREATE INDEX audit_log_tenant_agent_at ON audit_log (tenant_id, agent_id, at, id);
CREATE INDEX audit_log_tenant_actor_at ON audit_log (tenant_id, actor, at, id);
CREATE INDEX audit_log_tenant_subject_at ON audit_log (tenant_id, subject, at, id);
