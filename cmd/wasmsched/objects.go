package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// strict decodes objects as kubectl does: an unknown or duplicate field is
// an error (a misspelt "allocatble" would otherwise test a node without
// allocatable resources).
var strict = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// readObjects reads Nodes and Pods from a YAML or JSON file: several
// documents, and List, NodeList or PodList objects, are all accepted.
func readObjects(path string) (nodes []*v1.Node, pods []*v1.Pod, err error) {
	nodes, pods, others, err := readObjectsAndOthers(path)
	if err == nil && len(others) > 0 {
		err = fmt.Errorf("%s: unexpected %s %s: only Nodes and Pods are read", path, others[0].GetAPIVersion(), others[0].GetKind())
	}
	return nodes, pods, err
}

// readObjectsAndOthers is readObjects keeping the objects of other kinds
// (the objects of policies' granted reads, for wasmsched test), as
// unstructured objects.
func readObjectsAndOthers(path string) (nodes []*v1.Node, pods []*v1.Pod, others []*unstructured.Unstructured, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var add func(raw []byte) error
	add = func(raw []byte) error {
		var tm metav1.TypeMeta
		if err := json.Unmarshal(raw, &tm); err != nil {
			return err
		}
		switch {
		case tm.APIVersion == "v1" && (tm.Kind == "Node" || tm.Kind == "Pod" || tm.Kind == "NodeList" || tm.Kind == "PodList" || tm.Kind == "List"):
		case tm.APIVersion == "" || tm.Kind == "":
			return fmt.Errorf("an object needs apiVersion and kind (it has apiVersion %q, kind %q)", tm.APIVersion, tm.Kind)
		default:
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw); err != nil {
				return err
			}
			others = append(others, u)
			return nil
		}
		obj, _, err := strict.Decode(raw, nil, nil)
		if err != nil {
			return err
		}
		switch o := obj.(type) {
		case *v1.Node:
			nodes = append(nodes, o)
		case *v1.Pod:
			pods = append(pods, o)
		case *v1.NodeList:
			for i := range o.Items {
				nodes = append(nodes, &o.Items[i])
			}
		case *v1.PodList:
			for i := range o.Items {
				pods = append(pods, &o.Items[i])
			}
		case *v1.List:
			for _, item := range o.Items {
				if err := add(item.Raw); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for n := 1; ; n++ {
		var raw runtime.RawExtension
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, nil, nil, fmt.Errorf("%s: document %d: %w", path, n, err)
		}
		if len(bytes.TrimSpace(raw.Raw)) == 0 || string(raw.Raw) == "null" {
			continue
		}
		if err := add(raw.Raw); err != nil {
			return nil, nil, nil, fmt.Errorf("%s: document %d: %w", path, n, err)
		}
	}
	return nodes, pods, others, nil
}

// readPod reads the one Pod in a file.
func readPod(path string) (*v1.Pod, error) {
	nodes, pods, err := readObjects(path)
	if err != nil {
		return nil, err
	}
	if len(pods) != 1 || len(nodes) != 0 {
		return nil, fmt.Errorf("%s: want exactly one Pod, found %d pods and %d nodes", path, len(pods), len(nodes))
	}
	p := pods[0]
	if p.Namespace == "" {
		p.Namespace = "default"
	}
	if p.UID == "" {
		p.UID = "wasmsched-test"
	}
	return p, nil
}

// clientFor builds a client from --kubeconfig and --context, the way kubectl does.
func clientFor(g *globalOptions) (kubernetes.Interface, error) {
	cfg, err := restConfigFor(g)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// restConfigFor is the client config of --kubeconfig and --context.
func restConfigFor(g *globalOptions) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = g.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: g.context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// snapshot reads every node and every pod bound to one, read-only.
func snapshot(ctx context.Context, client kubernetes.Interface) ([]*v1.Node, []*v1.Pod, error) {
	nl, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing nodes: %w", err)
	}
	pl, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName!="})
	if err != nil {
		return nil, nil, fmt.Errorf("listing pods: %w", err)
	}
	nodes := make([]*v1.Node, len(nl.Items))
	for i := range nl.Items {
		nodes[i] = &nl.Items[i]
	}
	pods := make([]*v1.Pod, len(pl.Items))
	for i := range pl.Items {
		pods[i] = &pl.Items[i]
	}
	return nodes, pods, nil
}
