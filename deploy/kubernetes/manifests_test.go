// Package kubernetes holds the manifests of one shellctl sandbox pod and
// their offline check: every document decodes strictly (an unknown or
// misspelled field, a duplicate key, a wrong type is an error) into its
// k8s.io/api type, and the hardening settings are asserted.
package kubernetes

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// kustomization is the part of kustomize's file this directory uses.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

// decodeStrict decodes one YAML document into the type its kind names.
func decodeStrict(doc []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, fmt.Errorf("read apiVersion and kind: %w", err)
	}
	var obj any
	switch tm.APIVersion + " " + tm.Kind {
	case "v1 Pod":
		obj = &corev1.Pod{}
	case "v1 Service":
		obj = &corev1.Service{}
	case "networking.k8s.io/v1 NetworkPolicy":
		obj = &networkingv1.NetworkPolicy{}
	case "kustomize.config.k8s.io/v1beta1 Kustomization":
		obj = &kustomization{}
	default:
		return nil, fmt.Errorf("apiVersion %q kind %q is not one this check knows: add its type to decodeStrict", tm.APIVersion, tm.Kind)
	}
	// Duplicate keys are refused while YAML becomes JSON; then the JSON
	// is decoded as the API server does it strictly: field names match
	// exactly (encoding/json would take readOnlyRootFileSystem for
	// readOnlyRootFilesystem), and an unknown or duplicate field is an
	// error.
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", tm.APIVersion, tm.Kind, err)
	}
	strict, err := kjson.UnmarshalStrict(js, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", tm.APIVersion, tm.Kind, err)
	}
	if len(strict) > 0 {
		return nil, fmt.Errorf("%s %s: %w", tm.APIVersion, tm.Kind, errors.Join(strict...))
	}
	return obj, nil
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// decodeFile decodes every document of a manifest file.
func decodeFile(data []byte) ([]any, error) {
	var out []any
	for i, doc := range docSep.Split(string(data), -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		obj, err := decodeStrict([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		out = append(out, obj)
	}
	return out, nil
}

func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// manifests decodes every *.yaml of this directory.
func manifests(t *testing.T) map[string][]any {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests here (%v)", err)
	}
	out := map[string][]any{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeFile(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[f] = objs
	}
	return out
}

func onlyPod(t *testing.T) *corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	for _, objs := range manifests(t) {
		for _, o := range objs {
			if p, ok := o.(*corev1.Pod); ok {
				pods = append(pods, p)
			}
		}
	}
	if len(pods) != 1 {
		t.Fatalf("%d pods in the manifests, want one sandbox pod", len(pods))
	}
	return pods[0]
}

func TestManifestsDecodeStrictly(t *testing.T) {
	m := manifests(t)
	var k *kustomization
	for _, o := range m["kustomization.yaml"] {
		k, _ = o.(*kustomization)
	}
	if k == nil {
		t.Fatal("kustomization.yaml has no Kustomization")
	}
	var want []string
	for f := range m {
		if f != "kustomization.yaml" {
			want = append(want, f)
		}
	}
	sort.Strings(want)
	got := slices.Clone(k.Resources)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("kustomization lists %v, the directory has %v", got, want)
	}
}

// A misspelled field, a field at the wrong level and a duplicate key are
// errors that name the field, not settings silently dropped.
func TestMisspelledFieldFails(t *testing.T) {
	data, err := os.ReadFile("pod.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeFile(data); err != nil {
		t.Fatalf("pod.yaml as committed: %v", err)
	}
	for _, c := range []struct{ name, from, to, field string }{
		{"misspelled", "readOnlyRootFilesystem: true", "readOnlyRootFileSystem: true", "readOnlyRootFileSystem"},
		{"wrong level", "    fsGroup: 10001\n", "    fsGroup: 10001\n    readOnlyRootFilesystem: true\n", "spec.securityContext.readOnlyRootFilesystem"},
		{"duplicate", "        readOnlyRootFilesystem: true\n", "        readOnlyRootFilesystem: true\n        readOnlyRootFilesystem: false\n", "readOnlyRootFilesystem"},
		{"unknown probe field", "          path: /healthz\n", "          path: /healthz\n          paht: /healthz\n", "paht"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := bytes.Replace(data, []byte(c.from), []byte(c.to), 1)
			if bytes.Equal(bad, data) {
				t.Fatalf("%q is not in pod.yaml: the case tests nothing", c.from)
			}
			_, err := decodeFile(bad)
			if err == nil {
				t.Fatalf("pod.yaml with %s field %q decoded without error", c.name, c.field)
			}
			if !strings.Contains(err.Error(), c.field) {
				t.Errorf("the error does not name %q: %v", c.field, err)
			}
		})
	}
}

func TestSandboxPodHardening(t *testing.T) {
	pod := onlyPod(t)
	spec := pod.Spec
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("automountServiceAccountToken must be false: no cluster credential inside the sandbox")
	}
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Error("pod securityContext.runAsNonRoot must be true")
	}
	if psc == nil || psc.RunAsUser == nil || *psc.RunAsUser != 10001 || psc.RunAsGroup == nil || *psc.RunAsGroup != 10001 || psc.FSGroup == nil || *psc.FSGroup != 10001 {
		t.Error("the pod must run as uid, gid and fsGroup 10001 (the image's dify)")
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("pod seccompProfile must be RuntimeDefault")
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("the container has no securityContext")
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
		t.Error("container runAsNonRoot must be true")
	case sc.Privileged != nil && *sc.Privileged:
		t.Error("the container must not be privileged")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation must be false (no_new_privs)")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem must be true")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("capabilities must drop ALL and add none: %+v", sc.Capabilities)
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("container seccompProfile must be RuntimeDefault")
	}
	// The API on 5004, probes on /healthz (no token needed there).
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 5004 || c.Ports[0].Name != "http" {
		t.Errorf("ports %+v, want http 5004", c.Ports)
	}
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port != intstr.FromString("http") {
			t.Errorf("%s probe must GET /healthz on port http: %+v", name, p)
		}
	}
	// Requests and limits, limits not below requests.
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		req, okr := c.Resources.Requests[r]
		lim, okl := c.Resources.Limits[r]
		if !okr || !okl {
			t.Errorf("%s needs a request and a limit", r)
			continue
		}
		if lim.Cmp(req) < 0 {
			t.Errorf("%s limit %s is below its request %s", r, lim.String(), req.String())
		}
	}
	if m := c.Resources.Limits[corev1.ResourceMemory]; m.Cmp(resource.MustParse("64Mi")) < 0 {
		t.Errorf("memory limit %s is too small for a sandbox", m.String())
	}
	// The token by file from a Secret, read-only; required.
	args := strings.Join(c.Args, " ")
	if !strings.Contains(args, "--token-file /run/secrets/shellctl/token") || !strings.Contains(args, "--require-auth-token") {
		t.Errorf("serve must take its token by --token-file from the Secret and require it: %q", args)
	}
	if strings.Contains(args, "--token ") {
		t.Errorf("--token shows the token in /proc: %q", args)
	}
	if !strings.Contains(args, "--allowed-hosts shellctl-sandbox,") {
		t.Errorf("clients reach the pod by the Service's name: serve must answer it (--allowed-hosts): %q", args)
	}
	if !strings.Contains(args, "--listen 0.0.0.0:5004") {
		t.Errorf("serve must listen on 0.0.0.0:5004: %q", args)
	}
	for _, e := range c.Env {
		if strings.Contains(strings.ToUpper(e.Name), "TOKEN") {
			t.Errorf("environment variable %s: the token goes by file, never by environment", e.Name)
		}
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	vol := func(path string) (corev1.Volume, corev1.VolumeMount) {
		m, ok := mounts[path]
		if !ok {
			t.Errorf("nothing is mounted at %s", path)
			return corev1.Volume{}, m
		}
		return vols[m.Name], m
	}
	if v, _ := vol("/var/lib/shellctl"); v.EmptyDir == nil {
		t.Error("the state dir's volume must be an emptyDir")
	}
	if !strings.Contains(args, "--state-dir /var/lib/shellctl/") {
		t.Errorf("--state-dir must be a directory inside the state volume (the server makes it 0700, its own): %q", args)
	}
	if v, _ := vol("/home/dify"); v.EmptyDir == nil && v.PersistentVolumeClaim == nil {
		t.Error("Home needs a volume (emptyDir or a claim)")
	}
	if v, _ := vol("/tmp"); v.EmptyDir == nil {
		t.Error("/tmp needs an emptyDir (the root is read-only)")
	}
	v, m := vol("/run/secrets/shellctl")
	if v.Secret == nil || v.Secret.SecretName == "" || !m.ReadOnly {
		t.Errorf("the token must come from a Secret mounted read-only: %+v %+v", v, m)
	}
	if v.Secret != nil && (v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o007 != 0) {
		t.Error("the token file must not be readable by others (defaultMode without o+r)")
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("volume %s is a hostPath: the sandbox must not reach the node's files", v.Name)
		}
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Error("the sandbox must not share the node's network, PID or IPC namespace")
	}
}

// The Service and the NetworkPolicy select the sandbox pod.
func TestServiceAndPolicySelectThePod(t *testing.T) {
	pod := onlyPod(t)
	for _, objs := range manifests(t) {
		for _, o := range objs {
			var sel map[string]string
			var what string
			switch x := o.(type) {
			case *corev1.Service:
				sel, what = x.Spec.Selector, "service "+x.Name
				if len(x.Spec.Ports) != 1 || x.Spec.Ports[0].Port != 5004 {
					t.Errorf("%s ports %+v, want 5004", what, x.Spec.Ports)
				}
			case *networkingv1.NetworkPolicy:
				sel, what = x.Spec.PodSelector.MatchLabels, "network policy "+x.Name
			default:
				continue
			}
			if len(sel) == 0 {
				t.Errorf("%s selects nothing", what)
			}
			for k, v := range sel {
				if pod.Labels[k] != v {
					t.Errorf("%s selects %s=%s, the pod has %q", what, k, v, pod.Labels[k])
				}
			}
		}
	}
}
