-- SQLite's audit indexes become ascending in this migration (see
-- sqlite/0025): SQLite split a page on every insert at the left end of a
-- descending index. PostgreSQL's audit log is partitioned by month and its
-- B-tree inserts measured 2-3 % of server CPU, so its indexes stay as they
-- are; the number is kept so that both stores share one version sequence.
SELECT 1;
