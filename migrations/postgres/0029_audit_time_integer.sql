-- Nothing changes on PostgreSQL: migration 0029 stores the embedded
-- store's audit times as integers (see sqlite/0029). A timestamptz here is
-- eight bytes already.
SELECT 1;
