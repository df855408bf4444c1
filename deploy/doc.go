// Package deploy holds Switchboard's deployment files: deploy/Dockerfile,
// deploy/compose.yaml (one server on PostgreSQL) and deploy/kubernetes/
// (a migration Job, a Deployment of several replicas, a Service). It has
// no Go code; this file exists so the directory is a documented part of the
// module layout.
package deploy
