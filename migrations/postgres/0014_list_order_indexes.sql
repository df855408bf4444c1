-- The keyset orders the lists are paged in (newest first, ties broken by
-- id), so that every page is one index range scan. Each replaces an index
-- on tenant_id alone, which its leading column still serves.
CREATE INDEX callers_tenant_created ON callers (tenant_id, created_at DESC, id DESC);
DROP INDEX callers_tenant;
CREATE INDEX api_keys_tenant_created ON api_keys (tenant_id, created_at DESC, id DESC);
DROP INDEX api_keys_tenant;
CREATE INDEX member_invitations_tenant_created ON member_invitations (tenant_id, created_at DESC, id DESC);
DROP INDEX member_invitations_tenant;
CREATE INDEX operator_tokens_created ON operator_tokens (created_at DESC, id DESC);
-- tenants (slug), instances (tenant_id, slug), members (tenant_id, email)
-- and oauth_providers (slug) are paged by the unique keys they already
-- have an index on.
