// Package registry holds connectors: their manifests, the catalog that lists
// them with the hash of every file, and the entity -> action -> operation
// registry compiled from each connector's OpenAPI description. It also
// dispatches an operation to the vendor: it builds the upstream request from
// the registry, sends it through the guarded outbound client and maps the
// vendor's answer to a typed result or a typed, secret-free error.
//
// The registry is data. It never holds credentials: the caller of Dispatch
// passes an Applier that injects them into the request.
package registry
