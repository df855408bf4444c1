-- The per-instance MCP tools switch (issue 16): how an instance endpoint
-- declares its tools. 'tools' lists the connector's tools; 'meta' serves
-- the tenant catalog's meta-tools (search, describe, call, guide) scoped
-- to the instance; 'auto' serves the meta-tools when the tools/list
-- would exceed the tenant's context budget.
ALTER TABLE instances ADD COLUMN tools_mode TEXT NOT NULL DEFAULT 'auto'
    CHECK (tools_mode IN ('auto', 'tools', 'meta'));

-- A tenant's context budget: the largest tools/list (bytes) an instance
-- endpoint of the tenant serves in 'auto'. NULL: the operator's default
-- (--mcp-context-budget).
ALTER TABLE tenants ADD COLUMN mcp_context_budget INTEGER;
