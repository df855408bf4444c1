// Package switchboard is the leaf package shared by every domain package: the
// identifiers that cross package boundaries and the small error vocabulary
// that the admin API and the MCP endpoint each map in exactly one place.
//
// It imports nothing from the module, so any package may import it without
// creating a cycle.
package switchboard
