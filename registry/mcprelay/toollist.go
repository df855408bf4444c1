package mcprelay

import (
	"encoding/json"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ToolList is a proxied server's tool list as its instance caches it:
// the tools, and what the checks of a call read from them, worked out
// once per listing rather than per call: each tool's x-mcp-header
// bindings (SEP-2243), read from its input schema.
type ToolList struct {
	Tools    []*sdk.Tool
	bindings map[string][]ParamBinding
}

// NewToolList returns the list of tools (nil is an empty list).
func NewToolList(tools []*sdk.Tool) *ToolList {
	if tools == nil {
		tools = []*sdk.Tool{}
	}
	l := &ToolList{Tools: tools}
	seen := make(map[string]bool, len(tools))
	for _, tool := range tools {
		if tool == nil {
			continue
		}
		if seen[tool.Name] {
			continue // the first of a name, as a scan of the list finds
		}
		seen[tool.Name] = true
		if b := paramBindings(tool); len(b) > 0 {
			if l.bindings == nil {
				l.bindings = map[string][]ParamBinding{}
			}
			l.bindings[tool.Name] = b
		}
	}
	return l
}

// Bindings returns the x-mcp-header bindings of the tool named name (none
// for a tool without, or not in the list).
func (l *ToolList) Bindings(name string) []ParamBinding {
	return l.bindings[name]
}

// ParamBinding is one argument of a tool, by its property path, that a
// 2026-07-28 caller mirrors into the header Mcp-Param-{Header}.
type ParamBinding struct {
	Path   []string
	Header string
}

// headerProperty is what of an input schema's property the bindings need;
// the property's type is not read (a type list is as good as a type).
type headerProperty struct {
	XMCPHeader json.RawMessage           `json:"x-mcp-header"`
	Properties map[string]headerProperty `json:"properties"`
}

// paramBindings returns the x-mcp-header bindings of a tool's input
// schema, at any depth of properties.
func paramBindings(tool *sdk.Tool) []ParamBinding {
	b, err := json.Marshal(tool.InputSchema)
	if err != nil || !strings.Contains(string(b), "x-mcp-header") {
		return nil
	}
	var root headerProperty
	if json.Unmarshal(b, &root) != nil {
		return nil
	}
	return collectBindings(root.Properties, nil, nil)
}

func collectBindings(props map[string]headerProperty, prefix []string, out []ParamBinding) []ParamBinding {
	for name, p := range props {
		path := append(append([]string(nil), prefix...), name)
		var header string
		if json.Unmarshal(p.XMCPHeader, &header) == nil && header != "" {
			out = append(out, ParamBinding{Path: path, Header: header})
		}
		out = collectBindings(p.Properties, path, out)
	}
	return out
}
