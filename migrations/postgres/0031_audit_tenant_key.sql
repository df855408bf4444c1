-- PostgreSQL's audit log keyed by (tenant_id, at, id), as SQLite's is
-- since 0028, and its subject index holding only the rows whose subject
-- is not their actor, as SQLite's does: two B-tree inserts fewer per row
-- in the common case (an agent acting for its own user), of six.
--
-- The primary key (id, at) served only to recognise a replayed row and
-- retention's deletes; (tenant_id, at, id) is as unique (an id is unique
-- by itself), recognises the same replayed row, and is the tenant
-- listing's index, which goes. A user's rows are read as the actor's
-- (their index) plus those with the user as subject and another actor
-- (the partial index), two disjoint ranges merged in order
-- (audit.pageQuery).
--
-- Backend CPU per row, 256-row batches in isolation: 38.9 -> 32.2 us
-- with the INSERT, 30.9 -> 24.6 us with COPY (docs/performance.md).
ALTER TABLE audit_log DROP CONSTRAINT audit_log_pkey;
ALTER TABLE audit_log ADD PRIMARY KEY (tenant_id, at, id);
DROP INDEX audit_log_tenant_at;
DROP INDEX audit_log_tenant_subject_at;
CREATE INDEX audit_log_tenant_subject_at ON audit_log (tenant_id, subject, at, id) WHERE subject <> actor;
