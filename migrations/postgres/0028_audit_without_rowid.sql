-- Nothing changes on PostgreSQL: migration 0028 rebuilds the embedded
-- store's audit log as a WITHOUT ROWID table (see sqlite/0028). The audit
-- log here is partitioned by month, keyed by (id, at), and retention drops
-- whole months.
SELECT 1;
