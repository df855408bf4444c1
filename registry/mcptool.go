package registry

import (
	"encoding/json"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPTool is the entity as the MCP endpoint declares it to the official
// SDK: the one place that builds it, so that what the compiler measures
// for the tools budget is what clients receive.
func (e *Entity) MCPTool() *sdk.Tool {
	a := e.Annotations.MCP()
	tool := &sdk.Tool{
		Name:        e.Name,
		Description: e.Description,
		InputSchema: e.InputSchema,
		Annotations: &sdk.ToolAnnotations{
			ReadOnlyHint:    a.ReadOnlyHint,
			IdempotentHint:  a.IdempotentHint,
			DestructiveHint: a.DestructiveHint,
			OpenWorldHint:   a.OpenWorldHint,
		},
	}
	if e.OutputSchema != nil {
		// Set only when present: a nil *Schema in the interface is not nil.
		tool.OutputSchema = e.OutputSchema
	}
	return tool
}

// MCPToolSize is the size of the entity's tool in the SDK's tools/list
// result (its JSON plus the comma that separates it).
func (e *Entity) MCPToolSize() int {
	b, err := json.Marshal(e.MCPTool())
	if err != nil {
		return 1 << 30
	}
	return len(b) + 1
}

// MCPToolsListSize is the size of the SDK's tools/list result,
// {"tools":[...]}, for the entities: what a client receives less the
// JSON-RPC envelope.
func MCPToolsListSize(entities []*Entity) int {
	n := len(`{"tools":[]}`) - 1
	for _, e := range entities {
		n += e.MCPToolSize()
	}
	return max(n, len(`{"tools":[]}`))
}
