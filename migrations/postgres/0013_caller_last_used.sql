-- When a caller's token last authenticated a call, for the console's
-- Callers list. Written at most once a minute per caller and server, off
-- the call's path; NULL until the first call.
ALTER TABLE callers ADD COLUMN last_used_at TIMESTAMPTZ;
