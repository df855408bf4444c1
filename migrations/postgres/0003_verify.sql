-- Verify before save: an instance is activated only when its connector's
-- verification passed (auth_state 'ready'); one whose connector declares
-- none, or whose verification needs a connected user, is activated
-- unverified (auth_state 'unverified'). The outcome of the last
-- verification is kept with it: the message and details, secret values
-- redacted, and when it ran.
ALTER TABLE instances ADD COLUMN auth_state TEXT NOT NULL DEFAULT 'unverified';
ALTER TABLE instances ADD COLUMN verify_kind TEXT NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN verify_message TEXT NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN verify_details TEXT NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN verified_at TIMESTAMPTZ;
