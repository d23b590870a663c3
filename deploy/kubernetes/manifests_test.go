// Package kubernetes holds the manifests of one shellctl sandbox (a
// Namespace, a StatefulSet of one, a Service, a NetworkPolicy, a
// kustomization) and their offline check: every document decodes strictly
// (an unknown or misspelled field, a duplicate key, a wrong type is an
// error) into its k8s.io/api type, and the hardening, the network policy,
// the scrape annotation, the allowed hosts and the image placeholder are
// asserted.
package kubernetes

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// kustomization is the part of kustomize's file this directory uses (its
// field names as kustomize spells them: a field not here is an error).
type kustomization struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Namespace  string           `json:"namespace"`
	Resources  []string         `json:"resources"`
	Images     []kustomizeImage `json:"images"`
}

// kustomizeImage is an entry of images: the image name it matches and
// what replaces the name, the tag or both (a digest instead of a tag).
type kustomizeImage struct {
	Name    string `json:"name"`
	NewName string `json:"newName"`
	NewTag  string `json:"newTag"`
	Digest  string `json:"digest"`
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
	case "v1 Namespace":
		obj = &corev1.Namespace{}
	case "apps/v1 StatefulSet":
		obj = &appsv1.StatefulSet{}
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

// only returns the one object of type T in the manifests.
func only[T any](t *testing.T, m map[string][]any, what string) T {
	t.Helper()
	var found []T
	for _, objs := range m {
		for _, o := range objs {
			if x, ok := o.(T); ok {
				found = append(found, x)
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s in the manifests, want one", len(found), what)
	}
	return found[0]
}

// sandbox is the StatefulSet of the sandbox.
func sandbox(t *testing.T) *appsv1.StatefulSet {
	t.Helper()
	return only[*appsv1.StatefulSet](t, manifests(t), "StatefulSets")
}

func kustomize(t *testing.T) *kustomization {
	t.Helper()
	return only[*kustomization](t, manifests(t), "Kustomizations")
}

func argsOf(c corev1.Container) string { return strings.Join(c.Args, " ") }

// argValue is the value that follows flag in args ("" without it).
func argValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
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
	// Every kind an operator expects is here; the bare Pod is not.
	kinds := map[string]int{}
	for _, objs := range m {
		for _, o := range objs {
			kinds[fmt.Sprintf("%T", o)]++
		}
	}
	for _, k := range []string{"*v1.Namespace", "*v1.StatefulSet", "*v1.Service", "*v1.NetworkPolicy", "*kubernetes.kustomization"} {
		if kinds[k] != 1 {
			t.Errorf("%d of %s in the manifests, want 1 (all: %v)", kinds[k], k, kinds)
		}
	}
	if kinds["*v1.Pod"] != 0 {
		t.Error("a bare Pod: the StatefulSet makes the sandbox's pod")
	}
}

// A misspelled field, a field at the wrong level and a duplicate key are
// errors that name the field, not settings silently dropped; the same for
// kustomize's own file.
func TestMisspelledFieldFails(t *testing.T) {
	for _, c := range []struct{ file, name, from, to, field string }{
		{"statefulset.yaml", "misspelled", "readOnlyRootFilesystem: true", "readOnlyRootFileSystem: true", "readOnlyRootFileSystem"},
		{"statefulset.yaml", "wrong level", "        fsGroup: 10001\n", "        fsGroup: 10001\n        readOnlyRootFilesystem: true\n", "spec.template.spec.securityContext.readOnlyRootFilesystem"},
		{"statefulset.yaml", "duplicate", "            readOnlyRootFilesystem: true\n", "            readOnlyRootFilesystem: true\n            readOnlyRootFilesystem: false\n", "readOnlyRootFilesystem"},
		{"statefulset.yaml", "unknown probe field", "              path: /healthz\n", "              path: /healthz\n              paht: /healthz\n", "paht"},
		{"statefulset.yaml", "claim template field", "        accessModes:\n", "        accesModes:\n", "accesModes"},
		{"networkpolicy.yaml", "ipBlock field", "            except:\n", "            exept:\n", "exept"},
		{"kustomization.yaml", "kustomize images field", "    newTag: VERSION\n", "    newtag: VERSION\n", "newtag"},
		{"namespace.yaml", "namespace field", "  labels:\n", "  label:\n", "label"},
	} {
		t.Run(c.name, func(t *testing.T) {
			data, err := os.ReadFile(c.file)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := decodeFile(data); err != nil {
				t.Fatalf("%s as committed: %v", c.file, err)
			}
			bad := bytes.Replace(data, []byte(c.from), []byte(c.to), 1)
			if bytes.Equal(bad, data) {
				t.Fatalf("%q is not in %s: the case tests nothing", c.from, c.file)
			}
			_, err = decodeFile(bad)
			if err == nil {
				t.Fatalf("%s with %s field %q decoded without error", c.file, c.name, c.field)
			}
			if !strings.Contains(err.Error(), c.field) {
				t.Errorf("the error does not name %q: %v", c.field, err)
			}
		})
	}
}

// The StatefulSet: one sandbox, its Home on a claim of its own, and the
// pod template as hardened as the bare pod was.
func TestSandboxStatefulSet(t *testing.T) {
	sts := sandbox(t)
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 1 {
		t.Errorf("replicas %v, want 1: one sandbox (one server on its state and Home)", sts.Spec.Replicas)
	}
	if sts.Spec.Selector == nil || len(sts.Spec.Selector.MatchLabels) == 0 {
		t.Fatal("the StatefulSet has no selector")
	}
	for k, v := range sts.Spec.Selector.MatchLabels {
		if sts.Spec.Template.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the template's labels %v", k, v, sts.Spec.Template.Labels)
		}
	}
	svc := only[*corev1.Service](t, manifests(t), "Services")
	if sts.Spec.ServiceName != svc.Name {
		t.Errorf("serviceName %q, the Service is %q", sts.Spec.ServiceName, svc.Name)
	}
	var home *corev1.PersistentVolumeClaim
	for i := range sts.Spec.VolumeClaimTemplates {
		if sts.Spec.VolumeClaimTemplates[i].Name == "home" {
			home = &sts.Spec.VolumeClaimTemplates[i]
		}
	}
	if home == nil {
		t.Fatal("no volumeClaimTemplate \"home\": Home would not outlive the pod")
	}
	if !slices.Equal(home.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
		t.Errorf("home claim access modes %v, want [ReadWriteOnce]", home.Spec.AccessModes)
	}
	if q, ok := home.Spec.Resources.Requests[corev1.ResourceStorage]; !ok || q.Cmp(resource.MustParse("1Gi")) < 0 {
		t.Errorf("home claim requests %v of storage, want at least 1Gi", home.Spec.Resources.Requests)
	}
	c := sts.Spec.Template.Spec.Containers[0]
	var homeMount *corev1.VolumeMount
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == "/home/dify" {
			homeMount = &c.VolumeMounts[i]
		}
	}
	if homeMount == nil || homeMount.Name != "home" {
		t.Errorf("/home/dify mounts %+v, want the claim \"home\"", homeMount)
	}
	for _, v := range sts.Spec.Template.Spec.Volumes {
		if v.Name == "home" {
			t.Error("a pod volume named home hides the claim template's")
		}
	}
}

// hardened asserts the sandbox's pod spec: today's hardening, for any
// workload kind that carries it. claims are the volumeClaimTemplates'
// names (a mount of one is a claim).
func hardened(t *testing.T, spec corev1.PodSpec, claims []string) {
	t.Helper()
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
	if len(c.Ports) == 0 || c.Ports[0].ContainerPort != 5004 || c.Ports[0].Name != "http" {
		t.Errorf("ports %+v, want http 5004 first", c.Ports)
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
		if v, ok := vols[m.Name]; ok {
			return v, m
		}
		if slices.Contains(claims, m.Name) {
			return corev1.Volume{Name: m.Name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: m.Name}}}, m
		}
		t.Errorf("%s mounts %q, which is neither a volume nor a claim template", path, m.Name)
		return corev1.Volume{}, m
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

// The StatefulSet's pod template is hardened.
func TestSandboxPodHardening(t *testing.T) {
	sts := sandbox(t)
	var claims []string
	for _, c := range sts.Spec.VolumeClaimTemplates {
		claims = append(claims, c.Name)
	}
	hardened(t, sts.Spec.Template.Spec, claims)
}

// The Service and the NetworkPolicy select the sandbox pod.
func TestServiceAndPolicySelectThePod(t *testing.T) {
	pod := sandbox(t).Spec.Template
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

// The kustomization puts everything in the Namespace it makes, whose Pod
// Security Admission level is restricted; no manifest names another.
func TestNamespace(t *testing.T) {
	m := manifests(t)
	k := kustomize(t)
	ns := only[*corev1.Namespace](t, m, "Namespaces")
	if k.Namespace == "" || ns.Name != k.Namespace {
		t.Errorf("kustomization namespace %q, Namespace %q: want the same, set", k.Namespace, ns.Name)
	}
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("Namespace labels %v: want pod-security.kubernetes.io/enforce=restricted", ns.Labels)
	}
	for f, objs := range m {
		for _, o := range objs {
			if x, ok := o.(metav1.Object); ok && x.GetNamespace() != "" && x.GetNamespace() != k.Namespace {
				t.Errorf("%s: %s is in namespace %q, the kustomization's is %q", f, x.GetName(), x.GetNamespace(), k.Namespace)
			}
		}
	}
}

// The image is a placeholder the kustomization's images: entry replaces;
// no registry of ours or tag like latest is baked in.
func TestImagePlaceholder(t *testing.T) {
	c := sandbox(t).Spec.Template.Spec.Containers[0]
	name, tag, ok := strings.Cut(c.Image, ":")
	if !ok || !strings.HasPrefix(name, "REGISTRY/") || tag != "VERSION" {
		t.Errorf("image %q, want the placeholder REGISTRY/shellctl:VERSION", c.Image)
	}
	var entry *kustomizeImage
	for i, e := range kustomize(t).Images {
		if e.Name == name {
			entry = &kustomize(t).Images[i]
		}
	}
	if entry == nil {
		t.Fatalf("kustomization images: has no entry named %q, the workload's image", name)
	}
	if entry.NewName == "" || (entry.NewTag == "") == (entry.Digest == "") {
		t.Errorf("images entry %+v: want newName and one of newTag or digest", *entry)
	}
}

// --metrics-listen on a port of its own, named, with the prometheus.io
// annotations pointing at it.
func TestMetricsScrape(t *testing.T) {
	tpl := sandbox(t).Spec.Template
	c := tpl.Spec.Containers[0]
	listen := argValue(c.Args, "--metrics-listen")
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		t.Fatalf("--metrics-listen %q: %v", listen, err)
	}
	if port == "5004" {
		t.Fatal("--metrics-listen must be a port of its own, not the API's")
	}
	var named bool
	for _, p := range c.Ports {
		if p.Name == "metrics" && strconv.Itoa(int(p.ContainerPort)) == port {
			named = true
		}
	}
	if !named {
		t.Errorf("no container port named metrics at %s: %+v", port, c.Ports)
	}
	a := tpl.Annotations
	if a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != port || a["prometheus.io/path"] != "/metrics" {
		t.Errorf("pod template annotations %v, want prometheus.io/scrape=true, port=%s, path=/metrics", a, port)
	}
}

// --allowed-hosts names the Service as clients in the cluster reach it:
// short, with the namespace, .svc and the cluster domain.
func TestAllowedHosts(t *testing.T) {
	svc := only[*corev1.Service](t, manifests(t), "Services")
	ns := kustomize(t).Namespace
	got := strings.Split(argValue(sandbox(t).Spec.Template.Spec.Containers[0].Args, "--allowed-hosts"), ",")
	for _, want := range []string{svc.Name, svc.Name + "." + ns, svc.Name + "." + ns + ".svc", svc.Name + "." + ns + ".svc.cluster.local"} {
		if !slices.Contains(got, want) {
			t.Errorf("--allowed-hosts %q lacks %q", got, want)
		}
	}
}

// allowsEgress tells whether policy lets the pod open a TCP connection
// to addr:port, as a NetworkPolicy is read: any rule allowing it allows
// it. Peers that select pods or namespaces are not addresses and allow
// none here (TestNetworkPolicy checks that they are the DNS pods only).
func allowsEgress(np *networkingv1.NetworkPolicy, addr netip.Addr, port int32, proto corev1.Protocol) bool {
	for _, r := range np.Spec.Egress {
		if !portMatches(r.Ports, port, proto) {
			continue
		}
		if len(r.To) == 0 {
			return true // to everything
		}
		for _, peer := range r.To {
			if peer.IPBlock == nil {
				continue
			}
			cidr, err := netip.ParsePrefix(peer.IPBlock.CIDR)
			if err != nil || !cidr.Contains(addr) {
				continue
			}
			excepted := false
			for _, e := range peer.IPBlock.Except {
				if p, err := netip.ParsePrefix(e); err == nil && p.Contains(addr) {
					excepted = true
				}
			}
			if !excepted {
				return true
			}
		}
	}
	return false
}

func portMatches(ports []networkingv1.NetworkPolicyPort, port int32, proto corev1.Protocol) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		pr := corev1.ProtocolTCP
		if p.Protocol != nil {
			pr = *p.Protocol
		}
		if pr == proto && (p.Port == nil || p.Port.IntValue() == int(port)) {
			return true
		}
	}
	return false
}

// Egress: the cloud's metadata address and the cluster's internal ranges
// are denied, the public internet (v4 and v6) allowed, DNS only to the
// cluster's DNS pods; ingress: the API from the clients, /metrics from
// the monitoring namespace, nothing else.
func TestNetworkPolicy(t *testing.T) {
	np := only[*networkingv1.NetworkPolicy](t, manifests(t), "NetworkPolicies")
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		t.Fatalf("policyTypes %v: want Ingress and Egress (without Egress, egress is not restricted at all)", np.Spec.PolicyTypes)
	}
	for _, a := range []string{
		"169.254.169.254", "fd00:ec2::254", // cloud metadata (AWS, GCP, Azure; AWS' IPv6)
		"10.0.0.1", "10.96.0.1", "10.255.255.254", // pods, Services, the API's ClusterIP
		"172.16.0.1", "172.31.255.254", "192.168.0.1", "192.168.255.254",
		"fc00::1", "fd12:3456::1", // ULA
	} {
		for _, port := range []int32{80, 443, 5004, 6443, 53} {
			if allowsEgress(np, netip.MustParseAddr(a), port, corev1.ProtocolTCP) {
				t.Errorf("egress to %s port %d is allowed: it must be denied", a, port)
			}
		}
	}
	for _, a := range []string{"1.1.1.1", "8.8.8.8", "172.32.0.1", "192.169.0.1", "11.0.0.1", "2606:4700:4700::1111", "2001:db8::1"} {
		if !allowsEgress(np, netip.MustParseAddr(a), 443, corev1.ProtocolTCP) {
			t.Errorf("egress to %s:443 (the public internet) is denied: jobs need it", a)
		}
	}
	// What the API server validates of an ipBlock: a CIDR, and every
	// except a CIDR inside it (strict decoding does not look at values).
	for _, r := range np.Spec.Egress {
		for _, peer := range r.To {
			if peer.IPBlock == nil {
				continue
			}
			cidr, err := netip.ParsePrefix(peer.IPBlock.CIDR)
			if err != nil {
				t.Errorf("ipBlock cidr %q: %v", peer.IPBlock.CIDR, err)
				continue
			}
			for _, e := range peer.IPBlock.Except {
				p, err := netip.ParsePrefix(e)
				if err != nil || p.Addr().Is4() != cidr.Addr().Is4() || p.Bits() < cidr.Bits() || !cidr.Contains(p.Addr()) || p.Masked() != p {
					t.Errorf("ipBlock %s: except %q is not a CIDR inside it (%v)", cidr, e, err)
				}
			}
		}
	}
	// Every rule that is not an address block is DNS to the DNS pods.
	var dns bool
	for _, r := range np.Spec.Egress {
		for _, peer := range r.To {
			if peer.IPBlock != nil {
				continue
			}
			if peer.PodSelector == nil || peer.PodSelector.MatchLabels["k8s-app"] != "kube-dns" || peer.NamespaceSelector == nil ||
				peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "kube-system" {
				t.Errorf("egress peer %+v: only the cluster's DNS pods may be selected", peer)
			}
			if !portMatches(r.Ports, 53, corev1.ProtocolUDP) || !portMatches(r.Ports, 53, corev1.ProtocolTCP) || portMatches(r.Ports, 443, corev1.ProtocolTCP) {
				t.Errorf("egress rule to the DNS pods: ports %+v, want 53 UDP and TCP only", r.Ports)
			}
			dns = true
		}
	}
	if !dns {
		t.Error("no egress rule for DNS")
	}
	// Ingress: 5004 from the clients, the metrics port from monitoring.
	metricsPort, _ := strconv.Atoi(strings.TrimPrefix(argValue(sandbox(t).Spec.Template.Spec.Containers[0].Args, "--metrics-listen"), "0.0.0.0:"))
	if len(np.Spec.Ingress) != 2 {
		t.Fatalf("%d ingress rules, want 2 (the API from clients, /metrics from monitoring)", len(np.Spec.Ingress))
	}
	for i, want := range []struct {
		port int
		ok   func(networkingv1.NetworkPolicyPeer) bool
	}{
		{5004, func(p networkingv1.NetworkPolicyPeer) bool {
			return p.PodSelector != nil && p.PodSelector.MatchLabels["shellctl.io/client"] == "true" && p.NamespaceSelector == nil && p.IPBlock == nil
		}},
		{metricsPort, func(p networkingv1.NetworkPolicyPeer) bool {
			return p.NamespaceSelector != nil && p.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "" && p.IPBlock == nil
		}},
	} {
		r := np.Spec.Ingress[i]
		if len(r.Ports) != 1 || r.Ports[0].Port == nil || r.Ports[0].Port.IntValue() != want.port {
			t.Errorf("ingress rule %d ports %+v, want only %d", i, r.Ports, want.port)
		}
		if len(r.From) == 0 {
			t.Errorf("ingress rule %d is from everywhere", i)
		}
		for _, p := range r.From {
			if !want.ok(p) {
				t.Errorf("ingress rule %d from %+v", i, p)
			}
		}
	}
}
