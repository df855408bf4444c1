package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v4"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
)

// kinds are the Kubernetes objects deploy/kubernetes may hold, as the API
// types of k8s.io/api (the types the API server decodes them into).
var kinds = map[string]func() any{
	"v1/Secret":                              func() any { return &corev1.Secret{} },
	"v1/ServiceAccount":                      func() any { return &corev1.ServiceAccount{} },
	"v1/Service":                             func() any { return &corev1.Service{} },
	"batch/v1/Job":                           func() any { return &batchv1.Job{} },
	"apps/v1/Deployment":                     func() any { return &appsv1.Deployment{} },
	"policy/v1/PodDisruptionBudget":          func() any { return &policyv1.PodDisruptionBudget{} },
	"autoscaling/v2/HorizontalPodAutoscaler": func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
	"networking.k8s.io/v1/NetworkPolicy":     func() any { return &networkingv1.NetworkPolicy{} },
}

// k8s holds the decoded objects of deploy/kubernetes/switchboard.yaml.
type k8s struct {
	secrets    []*corev1.Secret
	services   []*corev1.Service
	jobs       []*batchv1.Job
	deploys    []*appsv1.Deployment
	pdbs       []*policyv1.PodDisruptionBudget
	hpas       []*autoscalingv2.HorizontalPodAutoscaler
	policies   []*networkingv1.NetworkPolicy
	serviceAcc []*corev1.ServiceAccount
}

// loadKubernetes decodes every document of the file strictly: an unknown
// field or a value of the wrong type anywhere fails, as it would at the
// API server (kubectl apply --validate=strict).
func loadKubernetes(t *testing.T, name string) *k8s {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	out := &k8s{}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for i := 0; ; i++ {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: document %d: %v", name, i, err)
		}
		if doc == nil {
			continue
		}
		kind := fmt.Sprintf("%v/%v", doc["apiVersion"], doc["kind"])
		newObj := kinds[kind]
		if newObj == nil {
			t.Fatalf("%s: document %d is a %s, which this test does not know", name, i, kind)
		}
		js, err := json.Marshal(doc)
		if err != nil {
			t.Fatalf("%s: document %d: %v", name, i, err)
		}
		obj := newObj()
		jd := json.NewDecoder(bytes.NewReader(js))
		jd.DisallowUnknownFields()
		if err := jd.Decode(obj); err != nil {
			t.Fatalf("%s: %s (document %d) does not decode as the API type: %v", name, kind, i, err)
		}
		switch o := obj.(type) {
		case *corev1.Secret:
			out.secrets = append(out.secrets, o)
		case *corev1.ServiceAccount:
			out.serviceAcc = append(out.serviceAcc, o)
		case *corev1.Service:
			out.services = append(out.services, o)
		case *batchv1.Job:
			out.jobs = append(out.jobs, o)
		case *appsv1.Deployment:
			out.deploys = append(out.deploys, o)
		case *policyv1.PodDisruptionBudget:
			out.pdbs = append(out.pdbs, o)
		case *autoscalingv2.HorizontalPodAutoscaler:
			out.hpas = append(out.hpas, o)
		case *networkingv1.NetworkPolicy:
			out.policies = append(out.policies, o)
		}
		if m, _ := doc["metadata"].(map[string]any); m["name"] == nil {
			t.Errorf("%s: %s (document %d) has no name", name, kind, i)
		}
	}
	return out
}

// settingNames reads the environment variables of the README's
// configuration table (generated from the settings table of
// cmd/switchboard, which a test there keeps in step).
func settingNames(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| [^|]*\\| `(SWITCHBOARD_[A-Z0-9_]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		names[m[1]] = true
	}
	if len(names) < 20 {
		t.Fatalf("found only %d settings in the README's configuration table", len(names))
	}
	return names
}

// matches reports whether selector selects labels.
func matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkPod holds a pod template to the image's promises: non-root by
// number, read-only root file system, no privilege escalation, no
// capabilities, resources requested, every secret it reads declared in
// the file, every setting a real one, writable directories mounted.
func checkPod(t *testing.T, what string, pod corev1.PodSpec, objs *k8s, settings map[string]bool) {
	t.Helper()
	sc := pod.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("%s: the pod must run as a numeric non-root user (runAsNonRoot and runAsUser)", what)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("%s: mounts a service account token it has no use for", what)
	}
	volumes := map[string]bool{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = true
	}
	for _, c := range pod.Containers {
		csc := c.SecurityContext
		if csc == nil || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem {
			t.Errorf("%s/%s: root file system not read-only", what, c.Name)
		}
		if csc == nil || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
			t.Errorf("%s/%s: privilege escalation allowed", what, c.Name)
		}
		if csc == nil || csc.Capabilities == nil || !slices.Contains(csc.Capabilities.Drop, "ALL") {
			t.Errorf("%s/%s: capabilities not dropped", what, c.Name)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s/%s: needs cpu and memory requests and a memory limit", what, c.Name)
		}
		for _, e := range c.Env {
			if !settings[e.Name] {
				t.Errorf("%s/%s: %s is not a setting of the README's configuration table", what, c.Name, e.Name)
			}
			if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				if strings.Contains(e.Name, "KEY") || strings.Contains(e.Name, "TOKEN") || strings.HasSuffix(e.Name, "DATABASE_URL") {
					t.Errorf("%s/%s: %s must come from a Secret", what, c.Name, e.Name)
				}
				continue
			}
			ref := e.ValueFrom.SecretKeyRef
			found := false
			for _, s := range objs.secrets {
				if s.Name == ref.Name {
					_, inString := s.StringData[ref.Key]
					_, inData := s.Data[ref.Key]
					found = inString || inData
				}
			}
			if !found {
				t.Errorf("%s/%s: %s reads secret %s key %s, which the file does not declare", what, c.Name, e.Name, ref.Name, ref.Key)
			}
		}
		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				t.Errorf("%s/%s: mounts undeclared volume %s", what, c.Name, m.Name)
			}
		}
	}
}

func env(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// The Kubernetes manifests decode strictly as the API's own types, and
// hold together: the Service, PodDisruptionBudget and NetworkPolicy select
// the Deployment's pods, the autoscaler scales it, the probes and ports
// name ports that exist, the grace period covers the shutdown delay and
// drain, egress is limited for every pod the file runs.
func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	settings := settingNames(t)
	objs := loadKubernetes(t, "kubernetes/switchboard.yaml")
	if len(objs.deploys) != 1 || len(objs.jobs) != 1 || len(objs.secrets) == 0 || len(objs.services) != 1 ||
		len(objs.pdbs) != 1 || len(objs.hpas) != 1 || len(objs.policies) == 0 {
		t.Fatalf("want one Deployment, migrate Job, Service, PodDisruptionBudget and HorizontalPodAutoscaler, a Secret and NetworkPolicies; got %d, %d, %d, %d, %d, %d, %d",
			len(objs.deploys), len(objs.jobs), len(objs.services), len(objs.pdbs), len(objs.hpas), len(objs.secrets), len(objs.policies))
	}
	d := objs.deploys[0]
	pod := d.Spec.Template
	if !matches(d.Spec.Selector.MatchLabels, pod.Labels) {
		t.Errorf("the Deployment's selector %v does not select its pods %v", d.Spec.Selector.MatchLabels, pod.Labels)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 3 {
		t.Errorf("the Deployment runs fewer than 3 replicas")
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Errorf("a rolling update may take a replica away before its successor is ready")
	}
	checkPod(t, "Deployment", pod.Spec, objs, settings)
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("the Deployment has %d containers", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("no HTTP %s probe", name)
			continue
		}
		if _, ok := ports[p.HTTPGet.Port.StrVal]; !ok && p.HTTPGet.Port.IntValue() == 0 {
			t.Errorf("%s probe names port %v, which the container does not declare", name, p.HTTPGet.Port)
		}
		want := "/readyz"
		if name == "liveness" {
			want = "/healthz"
		}
		if p.HTTPGet.Path != want {
			t.Errorf("%s probe path %s, want %s", name, p.HTTPGet.Path, want)
		}
	}
	if _, ok := ports["metrics"]; !ok || !strings.HasSuffix(env(c, "SWITCHBOARD_METRICS_ADDR"), fmt.Sprint(":", ports["metrics"])) {
		t.Errorf("the metrics port and SWITCHBOARD_METRICS_ADDR disagree")
	}
	delay, err1 := time.ParseDuration(env(c, "SWITCHBOARD_SHUTDOWN_DELAY"))
	drain, err2 := time.ParseDuration(env(c, "SWITCHBOARD_SHUTDOWN_TIMEOUT"))
	if err1 != nil || err2 != nil {
		t.Errorf("set SWITCHBOARD_SHUTDOWN_DELAY and SWITCHBOARD_SHUTDOWN_TIMEOUT: %v, %v", err1, err2)
	} else if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second < delay+drain+5*time.Second {
		t.Errorf("terminationGracePeriodSeconds must cover the shutdown delay and drain (%v) and the audit flush", delay+drain)
	}
	secret := objs.secrets[0]
	for _, k := range []string{"master-key", "admin-token", "database-url"} {
		if _, ok := secret.StringData[k]; !ok {
			t.Errorf("the Secret has no %s", k)
		}
	}

	j := objs.jobs[0]
	checkPod(t, "Job", j.Spec.Template.Spec, objs, settings)
	if jc := j.Spec.Template.Spec.Containers; len(jc) != 1 || !slices.Equal(jc[0].Args, []string{"migrate"}) || jc[0].Image != c.Image {
		t.Errorf("the Job must run `migrate` with the Deployment's image")
	}

	svc := objs.services[0]
	if !matches(svc.Spec.Selector, pod.Labels) {
		t.Errorf("the Service selects %v, not the Deployment's pods", svc.Spec.Selector)
	}
	for _, p := range svc.Spec.Ports {
		if _, ok := ports[p.TargetPort.StrVal]; !ok {
			t.Errorf("the Service's port %s targets %v, which the container does not declare", p.Name, p.TargetPort)
		}
	}
	pdb := objs.pdbs[0]
	if !matches(pdb.Spec.Selector.MatchLabels, pod.Labels) {
		t.Errorf("the PodDisruptionBudget does not select the Deployment's pods")
	}
	if pdb.Spec.MaxUnavailable == nil && pdb.Spec.MinAvailable == nil {
		t.Errorf("the PodDisruptionBudget bounds nothing")
	}
	hpa := objs.hpas[0]
	if ref := hpa.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.Name != d.Name {
		t.Errorf("the autoscaler scales %s/%s, not the Deployment", ref.Kind, ref.Name)
	}
	if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < *d.Spec.Replicas || hpa.Spec.MaxReplicas <= *hpa.Spec.MinReplicas {
		t.Errorf("the autoscaler's range does not keep the Deployment's replicas")
	}

	// Every pod the file runs is under a NetworkPolicy limiting egress, and
	// the server may reach no private or metadata address outside its
	// declared peers.
	for what, labels := range map[string]map[string]string{"Deployment": pod.Labels, "Job": j.Spec.Template.Labels} {
		covered := false
		for _, np := range objs.policies {
			if !matches(np.Spec.PodSelector.MatchLabels, labels) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
				continue
			}
			covered = true
			for _, rule := range np.Spec.Egress {
				if len(rule.Ports) == 0 {
					t.Errorf("NetworkPolicy %s: an egress rule allows every port", np.Name)
				}
				for _, peer := range rule.To {
					if b := peer.IPBlock; b != nil && b.CIDR == "0.0.0.0/0" {
						for _, private := range []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"} {
							if !slices.Contains(b.Except, private) {
								t.Errorf("NetworkPolicy %s: egress to 0.0.0.0/0 does not except %s", np.Name, private)
							}
						}
					}
				}
			}
		}
		if !covered {
			t.Errorf("the %s's pods have no egress NetworkPolicy", what)
		}
	}
}

// composeEnv is what an operator exports before `docker compose up`.
var composeEnv = map[string]string{
	"SWITCHBOARD_MASTER_KEY":  "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
	"SWITCHBOARD_ADMIN_TOKEN": strings.Repeat("t", 40),
}

func loadCompose(environment map[string]string) (*types.Project, error) {
	b, err := os.ReadFile("compose.yaml")
	if err != nil {
		return nil, err
	}
	return loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  ".",
		ConfigFiles: []types.ConfigFile{{Filename: "compose.yaml", Content: b}},
		Environment: environment,
	}, func(o *loader.Options) { o.SetProjectName("switchboard", true) })
}

// The compose file passes the Compose Specification's schema (compose-go,
// the loader docker compose itself uses) and runs three hardened replicas
// on one PostgreSQL behind the load balancer, which sends to exactly those
// replicas; without the master key it does not load.
func TestCompose(t *testing.T) {
	t.Parallel()
	settings := settingNames(t)
	p, err := loadCompose(composeEnv)
	if err != nil {
		t.Fatal(err)
	}
	var replicas []string
	for name, s := range p.Services {
		if s.Build == nil && !strings.HasPrefix(name, "switchboard") && name != "migrate" {
			continue
		}
		if s.Build != nil && s.Build.Dockerfile != "deploy/Dockerfile" {
			t.Errorf("%s builds %s", name, s.Build.Dockerfile)
		}
		if !s.ReadOnly || s.User != "65532:65532" || !slices.Contains(s.CapDrop, "ALL") {
			t.Errorf("%s: want read_only, user 65532:65532 and cap_drop ALL", name)
		}
		for k := range s.Environment {
			if !settings[k] {
				t.Errorf("%s: %s is not a setting of the README's configuration table", name, k)
			}
		}
		if name == "migrate" {
			if !slices.Equal(s.Command, types.ShellCommand{"migrate"}) || s.DependsOn["postgres"].Condition != types.ServiceConditionHealthy {
				t.Errorf("migrate must run `migrate` once PostgreSQL is healthy")
			}
			continue
		}
		replicas = append(replicas, name)
		if s.DependsOn["migrate"].Condition != types.ServiceConditionCompletedSuccessfully {
			t.Errorf("%s does not wait for the migrations", name)
		}
		if len(s.Volumes) != 1 || s.Volumes[0].Target != "/data" {
			t.Errorf("%s: want its own volume at /data (audit journal and spool)", name)
		}
		if len(s.Ports) != 0 {
			t.Errorf("%s publishes a port: traffic goes through the load balancer", name)
		}
	}
	slices.Sort(replicas)
	if len(replicas) != 3 {
		t.Fatalf("replicas = %v, want 3", replicas)
	}
	vols := map[string]bool{}
	for _, r := range replicas {
		vols[p.Services[r].Volumes[0].Source] = true
	}
	if len(vols) != 3 {
		t.Errorf("the replicas share a data volume: %v", vols)
	}
	lb, ok := p.Services["lb"]
	if !ok || len(lb.Ports) != 1 {
		t.Fatalf("no load balancer publishing one port")
	}
	conf, err := os.ReadFile("nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	var upstreams []string
	for _, m := range regexp.MustCompile(`(?m)^\s*server (\S+):8080`).FindAllStringSubmatch(string(conf), -1) {
		upstreams = append(upstreams, m[1])
	}
	slices.Sort(upstreams)
	if !slices.Equal(upstreams, replicas) {
		t.Errorf("nginx sends to %v, the replicas are %v", upstreams, replicas)
	}
	if _, err := loadCompose(map[string]string{"SWITCHBOARD_ADMIN_TOKEN": composeEnv["SWITCHBOARD_ADMIN_TOKEN"]}); err == nil ||
		!strings.Contains(err.Error(), "SWITCHBOARD_MASTER_KEY") {
		t.Errorf("compose loads without a master key: %v", err)
	}
}

// The image is built in stages, and its last stage is distroless, runs as
// a numeric non-root user (Kubernetes' runAsNonRoot can only verify a
// number) and starts the static binary.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var froms, users []string
	var static bool
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			froms = append(froms, f[1])
			users = nil
		case "USER":
			users = append(users, f[1])
		}
		static = static || strings.Contains(line, "CGO_ENABLED=0")
	}
	if len(froms) < 2 {
		t.Fatalf("not a multi-stage build: %v", froms)
	}
	if last := froms[len(froms)-1]; !strings.HasPrefix(last, "gcr.io/distroless/static") {
		t.Errorf("the final stage is %s, want distroless static", last)
	}
	if len(users) == 0 || !regexp.MustCompile(`^[1-9][0-9]*:[1-9][0-9]*$`).MatchString(users[len(users)-1]) {
		t.Errorf("the final stage's USER is %v, want a numeric non-root uid:gid", users)
	}
	if !static {
		t.Errorf("the binary is not built with CGO_ENABLED=0 (the distroless static image has no libc)")
	}
}
