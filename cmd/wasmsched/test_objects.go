package main

import (
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/kubemodel"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	"github.com/wasmsched/wasmsched/pkg/casetable"
)

// parseObjectReads parses one --objects value: the policy's granted reads
// as policies[].objects declares them, separated by ';', each
// APIVERSION/KIND=FIELD,FIELD (coordination.k8s.io/v1/Lease=spec.renewTime).
func parseObjectReads(s string) ([]config.ObjectRead, error) {
	var out []config.ObjectRead
	for _, item := range strings.Split(s, ";") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		kindPart, fieldPart, ok := strings.Cut(item, "=")
		k := strings.LastIndex(kindPart, "/")
		if !ok || k <= 0 || k == len(kindPart)-1 {
			return nil, fmt.Errorf("--objects %q: want APIVERSION/KIND=FIELD,FIELD (for example coordination.k8s.io/v1/Lease=spec.renewTime), reads separated by ';'", item)
		}
		r := config.ObjectRead{APIVersion: strings.TrimSpace(kindPart[:k]), Kind: strings.TrimSpace(kindPart[k+1:])}
		for _, f := range strings.Split(fieldPart, ",") {
			if f = strings.TrimSpace(f); f != "" {
				r.Fields = append(r.Fields, f)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// testGrants are the grants the policies' reads need: wasmsched test is
// its own operator. The resource of each kind comes from the cluster's
// discovery when rc is set (the watch needs it), else from the kind (the
// objects then come from the --nodes file, and the name only has to pass
// the same validation the scheduler's args do).
func testGrants(policies []config.Policy, rc *rest.Config) ([]config.ObjectGrant, error) {
	var out []config.ObjectGrant
	seen := map[string]bool{}
	var mapper *restmapper.DeferredDiscoveryRESTMapper
	for _, p := range policies {
		for _, r := range p.Objects {
			key := r.APIVersion + " " + r.Kind
			if seen[key] {
				continue
			}
			seen[key] = true
			g := casetable.LocalGrant(r)
			if rc != nil {
				if mapper == nil {
					dc, err := discovery.NewDiscoveryClientForConfig(rc)
					if err != nil {
						return nil, err
					}
					mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
				}
				gv, err := schema.ParseGroupVersion(r.APIVersion)
				if err != nil {
					return nil, fmt.Errorf("policy %s: objects %s: %w", p.Name, key, err)
				}
				m, err := mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: r.Kind}, gv.Version)
				if err != nil {
					return nil, fmt.Errorf("policy %s: objects %s: the cluster does not serve it: %w", p.Name, key, err)
				}
				g.Resource = m.Resource.Resource
			}
			out = append(out, g)
		}
	}
	return out, nil
}

// undeclaredKinds refuses documents of path that are neither Nodes, Pods
// nor of a kind some policy's --objects declares: a typo in a kind, or
// objects the policies would not see, rather than ignored in silence.
func undeclaredKinds(path string, objs []*unstructured.Unstructured, policies []config.Policy) error {
	declared := map[string]bool{}
	for _, p := range policies {
		for _, r := range p.Objects {
			declared[r.APIVersion+" "+r.Kind] = true
		}
		if slices.Contains(p.Reads, string(fields.ScopeDevices)) {
			for _, k := range draKinds {
				declared["resource.k8s.io/v1 "+k] = true
			}
		}
	}
	for _, u := range objs {
		if k := u.GetAPIVersion() + " " + u.GetKind(); !declared[k] {
			return fmt.Errorf("%s: %s %s/%s: only Nodes, Pods and the kinds of the policies' --objects are read; declare the kind with --objects %s/%s=FIELD,... or leave the document out",
				path, k, u.GetNamespace(), u.GetName(), u.GetAPIVersion(), u.GetKind())
		}
	}
	return nil
}

// draKinds are the resource.k8s.io/v1 kinds the Devices read sums up.
var draKinds = []string{"ResourceClaim", "ResourceSlice", "DeviceClass"}

// fileDRA holds the --nodes file's DRA objects for the Devices read, as
// the scheduler's DRA manager would hold them (their allocations as
// written: nothing is in flight in a file).
func fileDRA(objs []*unstructured.Unstructured) (*kubemodel.DRAObjects, error) {
	d := &kubemodel.DRAObjects{}
	for _, u := range objs {
		if u.GetAPIVersion() != "resource.k8s.io/v1" {
			continue
		}
		var err error
		switch u.GetKind() {
		case "ResourceClaim":
			c := &resourceapi.ResourceClaim{}
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, c)
			d.Claims = append(d.Claims, c)
		case "ResourceSlice":
			s := &resourceapi.ResourceSlice{}
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, s)
			d.ResourceSlices = append(d.ResourceSlices, s)
		case "DeviceClass":
			c := &resourceapi.DeviceClass{}
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, c)
			d.DeviceClasses = append(d.DeviceClasses, c)
		}
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return d, nil
}

// fileObjectReaders gives each policy's declared reads the --nodes file's
// objects of their kinds, with the declared fields read as the
// scheduler's watch reads them.
func fileObjectReaders(policies []config.Policy, objs []*unstructured.Unstructured) (func(policy string) []host.ObjectReader, error) {
	readers := map[string][]host.ObjectReader{}
	for _, p := range policies {
		for i, r := range p.Objects {
			data, err := casetable.ObjectData(r, objs)
			if err != nil {
				return nil, fmt.Errorf("policy %s: objects[%d].%w", p.Name, i, err)
			}
			readers[p.Name] = append(readers[p.Name], casetable.ObjectReader(data))
		}
	}
	return func(policy string) []host.ObjectReader { return readers[policy] }, nil
}
