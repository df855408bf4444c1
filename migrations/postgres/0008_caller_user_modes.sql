-- How each caller establishes the user it acts for: 'fixed' (the service
-- account user_id of the row, or none), 'header' (a trusted platform
-- asserts X-User-Id per request) or 'jwt' (a per-request JWT signed by the
-- platform carries the user). external_subjects lists, one per line, the
-- users outside the tenant's members the caller may name.
ALTER TABLE callers ADD COLUMN user_mode TEXT NOT NULL DEFAULT 'fixed';
ALTER TABLE callers ADD COLUMN external_subjects TEXT NOT NULL DEFAULT '';
-- Trusted agent platforms without a fixed user asserted users by header
-- before modes existed; they keep doing so. Every other caller sending
-- X-User-Id is now refused.
UPDATE callers SET user_mode = 'header' WHERE trusted AND user_id = '' AND kind = 'agent-platform';
