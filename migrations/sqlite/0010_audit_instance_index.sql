-- The audit log filtered by instance (the console's and the API's
-- ?instance=), in the (at, id) keyset order pages are read in.
CREATE INDEX audit_log_tenant_instance_at ON audit_log (tenant_id, instance, at DESC, id DESC);
