-- The change log numbers the changes of every NOTIFY channel (tenants'
-- changes, members' removals, grants' reconnects and disconnects), so
-- that each channel's listener replays what it missed after a
-- reconnection instead of dropping its caches (database.ChangeListener).
ALTER TABLE change_log ADD COLUMN channel TEXT NOT NULL DEFAULT 'switchboard_changes';
CREATE INDEX change_log_channel_seq ON change_log (channel, seq);
