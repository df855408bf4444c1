-- Nothing changes on SQLite: migration 0030 makes PostgreSQL's audit
-- indexes ascending (see postgres/0030), as 0025 made the embedded
-- store's.
SELECT 1;
