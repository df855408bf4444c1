-- A failed token request backs its grant off, for every replica: the row
-- counts consecutive failures, says when the next request may be sent and
-- keeps the last failure's code (never the provider's body).
ALTER TABLE auth_grants ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE auth_grants ADD COLUMN retry_at TIMESTAMPTZ;
ALTER TABLE auth_grants ADD COLUMN failure TEXT NOT NULL DEFAULT '';
