package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"sigs.k8s.io/yaml"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	"github.com/wasmsched/wasmsched/pkg/apis/config/validation"
	"github.com/wasmsched/wasmsched/pkg/policyobjects"
	"github.com/wasmsched/wasmsched/pkg/rollout"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

// loadProfile reads the scheduler's config: the profile and its WasmPolicy
// args, validated, set up for this tool (its compilation cache, two
// instances per policy for the framework's two filter workers).
func (o *rolloutOptions) loadProfile(ctx context.Context, g *globalOptions) (*schedconfig.KubeSchedulerProfile, *config.WasmPolicyArgs, error) {
	prof, args, err := wasmPolicyProfile(ctx, g, o.schedulerConfig, o.profile)
	if err != nil {
		return nil, nil, err
	}
	args = args.DeepCopy()
	args.CompilationCacheDir = cacheDir()
	args.MaxInstancesPerPolicy = 2
	return prof, args, nil
}

// wasmPolicyProfile reads a KubeSchedulerConfiguration (a file, or
// configmap:NAMESPACE/NAME[/KEY]) and returns the profile named profile
// ("": the first) with a WasmPolicy pluginConfig, and its args, decoded,
// defaulted and validated as the scheduler reads them.
func wasmPolicyProfile(ctx context.Context, g *globalOptions, configPath, profile string) (*schedconfig.KubeSchedulerProfile, *config.WasmPolicyArgs, error) {
	path := configPath
	if ref, ok := strings.CutPrefix(path, "configmap:"); ok {
		var err error
		if path, err = configFromConfigMap(ctx, g, ref); err != nil {
			return nil, nil, err
		}
		defer os.Remove(path)
	}
	cfg, err := options.LoadConfigFromFile(klog.Background(), path)
	if err != nil {
		return nil, nil, err
	}
	for i := range cfg.Profiles {
		prof := &cfg.Profiles[i]
		if profile != "" && prof.SchedulerName != profile {
			continue
		}
		for _, pc := range prof.PluginConfig {
			if pc.Name != wasmpolicy.Name {
				continue
			}
			args, err := wasmpolicy.DecodeArgs(pc.Args)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: profile %s: %w", configPath, prof.SchedulerName, err)
			}
			if errs := validation.ValidateWasmPolicyArgs(nil, args); len(errs) > 0 {
				return nil, nil, fmt.Errorf("%s: profile %s: %w", configPath, prof.SchedulerName, errs.ToAggregate())
			}
			return prof, args, nil
		}
	}
	if profile != "" {
		return nil, nil, fmt.Errorf("%s: no profile %q with a WasmPolicy pluginConfig", configPath, profile)
	}
	return nil, nil, fmt.Errorf("%s: no profile has a WasmPolicy pluginConfig", configPath)
}

// configFromConfigMap writes the KubeSchedulerConfiguration held by a
// ConfigMap (NAMESPACE/NAME[/KEY]) to a temporary file.
func configFromConfigMap(ctx context.Context, g *globalOptions, ref string) (string, error) {
	parts := strings.Split(ref, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return "", fmt.Errorf("--scheduler-config configmap:%s: want configmap:NAMESPACE/NAME or configmap:NAMESPACE/NAME/KEY", ref)
	}
	client, err := clientFor(g)
	if err != nil {
		return "", err
	}
	cm, err := client.CoreV1().ConfigMaps(parts[0]).Get(ctx, parts[1], metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("--scheduler-config: %w", err)
	}
	key := ""
	switch {
	case len(parts) == 3:
		key = parts[2]
	case cm.Data["config.yaml"] != "":
		key = "config.yaml"
	case len(cm.Data) == 1:
		for k := range cm.Data {
			key = k
		}
	default:
		return "", fmt.Errorf("--scheduler-config: ConfigMap %s/%s has no config.yaml and %d keys; name one: configmap:%s/%s/KEY", parts[0], parts[1], len(cm.Data), parts[0], parts[1])
	}
	data, ok := cm.Data[key]
	if !ok {
		return "", fmt.Errorf("--scheduler-config: ConfigMap %s/%s has no key %q", parts[0], parts[1], key)
	}
	f, err := os.CreateTemp("", "kube-scheduler-config-*.yaml")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.WriteString(data); err != nil {
		return "", err
	}
	return f.Name(), nil
}

// readPolicyObjectName reads a SchedulingPolicy or ClusterSchedulingPolicy
// file and returns the name of the policy it runs, unchecked: the checks
// need the scheduler's args (readPolicyObject).
func readPolicyObjectName(path string) (string, error) {
	u, err := readObjectFile(path)
	if err != nil {
		return "", err
	}
	name, err := policyobjects.PolicyNameOf(u)
	if err != nil {
		return "", fmt.Errorf("--object %s: %w", path, err)
	}
	return name, nil
}

func readObjectFile(path string) (*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--object: %w", err)
	}
	var m map[string]interface{}
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("--object %s: %w", path, err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// readPolicyObject reads a SchedulingPolicy or ClusterSchedulingPolicy
// file and returns the policy it runs, checked as the scheduler checks it
// under the args' tenants and grants.
func readPolicyObject(path string, tenants *config.Tenants, grants []config.ObjectGrant) (config.Policy, error) {
	u, err := readObjectFile(path)
	if err != nil {
		return config.Policy{}, err
	}
	p, err := policyobjects.PolicyOf(u, nil, tenants, grants)
	if err != nil {
		return config.Policy{}, fmt.Errorf("--object %s: %w", path, err)
	}
	return p, nil
}

// fileSnapshot reads a snapshot from a file, and a fake client serving its
// nodes and namespaces to the plugins' informers.
func fileSnapshot(path string) (*rollout.Snapshot, kubernetes.Interface, error) {
	nodes, pods, err := readObjects(path)
	if err != nil {
		return nil, nil, err
	}
	s := &rollout.Snapshot{Nodes: nodes, Pods: pods, TakenAt: time.Now()}
	var objs []runtime.Object
	seen := map[string]bool{}
	for _, p := range pods {
		if p.Namespace == "" {
			p.Namespace = "default"
		}
		if p.Spec.SchedulerName == "" {
			p.Spec.SchedulerName = v1.DefaultSchedulerName
		}
		if p.UID == "" { // the scheduler's caches key pods by UID
			p.UID = types.UID("snapshot/" + p.Namespace + "/" + p.Name)
		}
		if !seen[p.Namespace] {
			seen[p.Namespace] = true
			ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}}
			s.Namespaces = append(s.Namespaces, ns)
			objs = append(objs, ns)
		}
	}
	// The client serves the plugins' informers, which need no pods (the
	// frameworks read pods from the snapshot): a copy of every pod in the
	// fake client and in each set's informer would double the memory.
	for _, n := range nodes {
		objs = append(objs, n)
	}
	return s, fake.NewClientset(objs...), nil
}
