// Package auth answers two questions on the agent call path: who is calling
// (a caller credential resolved to a tenant, a caller, an agent id and a
// user id — Callers), and how the app instance authenticates to the vendor
// (buildAppAuth: an instance's auth mode and field values turned into a
// registry.Applier that injects upstream credentials — AppAuth).
//
// Credentials are held as secrets.Secret everywhere; an Applier reveals a
// value only inside Apply, as it writes it into the outgoing request. No
// error, log line or panic of this package contains a secret value.
package auth
