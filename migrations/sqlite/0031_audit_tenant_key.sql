-- Nothing changes on SQLite: migration 0031 gives PostgreSQL's audit log
-- the key (tenant_id, at, id) and the partial subject index that the
-- embedded store has had since 0028 (see postgres/0031).
SELECT 1;
