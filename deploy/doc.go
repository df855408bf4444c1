// Package deploy holds Switchboard's deployment files: deploy/Dockerfile,
// deploy/compose.yaml (three replicas on PostgreSQL behind nginx, deploy/nginx.conf) and deploy/kubernetes/
// (Secret, migrate Job, Deployment, Service, PodDisruptionBudget, HorizontalPodAutoscaler, NetworkPolicies); manifests_test.go validates them. It has
// no Go code; this file exists so the directory is a documented part of the
// module layout.
package deploy
