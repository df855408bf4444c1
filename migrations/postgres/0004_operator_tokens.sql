-- Operator tokens get a name, a source (env: SWITCHBOARD_ADMIN_TOKEN;
-- generated: printed at first start; created: admin API or CLI), the time
-- they were last used (updated at most once a minute per replica) and
-- revocation. A revoked token never verifies again.
ALTER TABLE operator_tokens ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE operator_tokens ADD COLUMN source TEXT NOT NULL DEFAULT 'env';
ALTER TABLE operator_tokens ADD COLUMN last_used_at TIMESTAMPTZ;
ALTER TABLE operator_tokens ADD COLUMN revoked_at TIMESTAMPTZ;
UPDATE operator_tokens SET source = 'generated', name = 'generated at first start' WHERE id = 'opt_generated';
UPDATE operator_tokens SET name = 'SWITCHBOARD_ADMIN_TOKEN' WHERE source = 'env';
