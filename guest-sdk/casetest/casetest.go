// Package casetest runs table-driven cases against a policy's registered
// functions natively (plain `go test`, no wasm). The same case files are
// replayed against the compiled module through the real host by the main
// module's tests, so native logic and wasm behaviour are held to one table.
package casetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

// File is a policy's case table: the config the policy runs with and its cases.
type File struct {
	Config string `json:"config"`
	// Reads are the policy's declared reads (policies[].reads), for the
	// compiled module and natively alike (sdk.SetReads): a read they do not
	// declare fails the call with an Error naming the declaration.
	Reads []string `json:"reads,omitempty"`
	// PatchPrefixes are the policy's policies[].patchPrefixes: the keys
	// its PreBind may write.
	PatchPrefixes []string `json:"patchPrefixes,omitempty"`
	// Objects are the policy's policies[].objects: the granted kinds it
	// reads, with their fields (read i is objects[i]). Each case gives the
	// objects of each read (Case.Objects).
	Objects []ObjectRead `json:"objects,omitempty"`
	// FailurePolicy is the policy's policies[].failurePolicy, Fail (the
	// default) or Ignore. Expectations are the guest's own codes; each
	// case's outcome also says what the scheduler makes of its verdict
	// under this failurePolicy.
	FailurePolicy string `json:"failurePolicy,omitempty"`
	Cases         []Case `json:"cases"`
}

// Case is one pod on one node with the expected verdicts, or one pod in
// front of several nodes in one scheduling cycle (Nodes). Nil expectations
// are not checked.
type Case struct {
	Name   string       `json:"name"`
	Pod    sdk.PodData  `json:"pod"`
	Node   sdk.NodeData `json:"node"`
	Filter *Expect      `json:"filter,omitempty"`
	Score  *int64       `json:"score,omitempty"`
	// Nodes, instead of Node, runs the case's pod through one whole cycle
	// over these nodes, as the scheduler does: prefilter (its node subset
	// included), filter on each node, then prescore, score and
	// normalize_score over the nodes that passed. Filters and Scores give
	// the expectations per node name.
	Nodes []sdk.NodeData `json:"nodes,omitempty"`
	// Filters are the expected verdicts (prefilter, then filter) by node
	// name; a node outside prefilter's node subset is
	// UnschedulableAndUnresolvable (code 3) with no reason.
	Filters map[string]Expect `json:"filters,omitempty"`
	// Scores are the expected final scores, after normalize_score, of the
	// nodes that passed, by node name; every such node must be listed. A
	// prescore Skip scores every node 0.
	Scores map[string]int64 `json:"scores,omitempty"`
	// Cluster is what sdk.Cluster sees in the case: its nodes (with their
	// pods), namespaces, and the pod's claims with their volumes and
	// classes. Without it, or without its nodes, the cluster's nodes are
	// the case's own; without namespaces or claims, there are none.
	Cluster *Cluster `json:"cluster,omitempty"`
	// Objects are the objects of each declared read (File.Objects), by
	// read: what the scheduler's watch of the kind holds in the case, with
	// the declared fields' values in their order. A read without an entry
	// holds no object.
	Objects [][]sdk.ObjectData `json:"objects,omitempty"`
	// Now is the wall clock (RFC 3339) the case runs at: sdk.Now natively,
	// the module's clock in the host. Unset, natively the real clock and
	// in the host the deterministic one (docs/abi.md §1).
	Now string `json:"now,omitempty"`
	// PreEnqueue is the expected gate verdict of the case's pod, and
	// Recheck, when set, what the gate asked about rechecking it.
	PreEnqueue *Expect        `json:"preEnqueue,omitempty"`
	Recheck    *ExpectRecheck `json:"recheck,omitempty"`
	// PreBind is the expected outcome of binding the case's pod to its
	// node: the verdict and the patch. CyclePolicies are what
	// sdk.CyclePolicies returns there.
	PreBind       *ExpectPreBind    `json:"preBind,omitempty"`
	CyclePolicies []sdk.CyclePolicy `json:"cyclePolicies,omitempty"`
	// PostFilter is the expected postfilter verdict of the case's pod in
	// its cycle, after its prefilter: what the policy adds to the message
	// of a pod that fits no node (Unschedulable and the reason).
	PostFilter *Expect `json:"postFilter,omitempty"`
	// PostBind is the expected postbind status once the pod is bound to
	// the case's node (the scheduler only logs it).
	PostBind *Expect `json:"postBind,omitempty"`
	// Reserved are pods placed before the case's pod is evaluated: each
	// is reserved on its node, in order (its reserve must pass), so the
	// counts they take are held while the case runs (sdk.AddCount). Every
	// count is given back after the case.
	Reserved []Placed `json:"reserved,omitempty"`
	// Reserve is the expected reserve verdict of the case's pod on its
	// node, with the counts after it (when Counts is set).
	Reserve *ExpectReserve `json:"reserve,omitempty"`
	// Unreserve, with Reserve, undoes the case pod's placement after its
	// reserve and expects the counts after that.
	Unreserve *ExpectCounts `json:"unreserve,omitempty"`
	// Waiting are pods reserved on their nodes (after Reserved) and
	// waiting at the policy's Permit when the case's permit runs.
	Waiting []Placed `json:"waiting,omitempty"`
	// Permit is the expected permit verdict of the case's pod on its
	// node, after its reserve (as the scheduler calls them), and what it
	// did to the waiting pods.
	Permit *ExpectPermit `json:"permit,omitempty"`
}

// ExpectPermit is an expected permit verdict: the code (4 for Wait) and
// reason, the wait (a Go duration, with code 4), and the names of the
// waiting pods it allowed and rejected (nil: not checked; empty: none).
type ExpectPermit struct {
	Code     int32    `json:"code"`
	Reason   string   `json:"reason,omitempty"`
	Wait     string   `json:"wait,omitempty"`
	Allowed  []string `json:"allowed,omitempty"`
	Rejected []string `json:"rejected,omitempty"`
}

// WaitingPod is the i-th waiting pod, with a UID of its own when the
// case gives none.
func (c *Case) WaitingPod(i int) sdk.PodData {
	p := c.Waiting[i].Pod
	if p.UID == "" {
		p.UID = fmt.Sprintf("waiting-%d-%s", i, p.Name)
	}
	return p
}

// CheckPermit says how a permit outcome differs from want ("" when it
// matches): allowed and rejected are pod names.
func CheckPermit(want *ExpectPermit, code int32, reason string, wait time.Duration, allowed, rejected []string) string {
	var out []string
	if code != want.Code || (want.Reason != "" && reason != want.Reason) {
		out = append(out, fmt.Sprintf("permit = %d %q, want %d %q", code, reason, want.Code, want.Reason))
	}
	if want.Wait != "" {
		if d, _ := time.ParseDuration(want.Wait); d != wait {
			out = append(out, fmt.Sprintf("permit wait = %s, want %s", wait, want.Wait))
		}
	}
	sorted := func(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
	if want.Allowed != nil && !slices.Equal(sorted(allowed), sorted(want.Allowed)) {
		out = append(out, fmt.Sprintf("permit allowed %v, want %v", allowed, want.Allowed))
	}
	if want.Rejected != nil && !slices.Equal(sorted(rejected), sorted(want.Rejected)) {
		out = append(out, fmt.Sprintf("permit rejected %v, want %v", rejected, want.Rejected))
	}
	return strings.Join(out, "; ")
}

// Placed is a pod reserved on a node before a case runs.
type Placed struct {
	Pod  sdk.PodData  `json:"pod"`
	Node sdk.NodeData `json:"node"`
}

// ExpectReserve is an expected reserve verdict and the counts after it
// (nil: not checked; empty: no count held).
type ExpectReserve struct {
	Code   int32            `json:"code"`
	Reason string           `json:"reason,omitempty"`
	Counts map[string]int64 `json:"counts,omitempty"`
}

// ExpectCounts are the counts expected after a step.
type ExpectCounts struct {
	Counts map[string]int64 `json:"counts"`
}

// PlacedPod is the i-th reserved pod with a UID of its own when the case
// gives none (the counts a pod holds are by UID).
func (c *Case) PlacedPod(i int) sdk.PodData {
	p := c.Reserved[i].Pod
	if p.UID == "" {
		p.UID = fmt.Sprintf("reserved-%d-%s", i, p.Name)
	}
	return p
}

// CasePod is the case's pod, with a UID of its own when it has none.
func (c *Case) CasePod() sdk.PodData {
	p := c.Pod
	if p.UID == "" && (len(c.Reserved) > 0 || c.Reserve != nil || c.Permit != nil) {
		p.UID = "case-" + p.Name
	}
	return p
}

// CheckCounts says how counts differ from want ("" when they match or
// want is nil).
func CheckCounts(step string, want, got map[string]int64) string {
	if want == nil || maps.Equal(want, got) || len(want) == 0 && len(got) == 0 {
		return ""
	}
	return fmt.Sprintf("%s counts = %v, want %v", step, got, want)
}

// HasGates reports whether the case expects anything of the points
// outside its filters and scores.
func (c *Case) HasGates() bool {
	return c.PreEnqueue != nil || c.PreBind != nil || c.PostFilter != nil || c.PostBind != nil || c.Reserve != nil || c.Permit != nil
}

// ExpectRecheck is what a gate is expected to ask with sdk.Recheck: the
// events by name (PodUpdate, PodsChange, NodesChange) and the delay (a Go
// duration, "" for none).
type ExpectRecheck struct {
	On    []string `json:"on"`
	After string   `json:"after,omitempty"`
}

// RecheckNames are the names of the recheck events in case files, by bit.
var RecheckNames = map[string]sdk.RecheckEvent{"PodUpdate": sdk.OnPodUpdate, "PodsChange": sdk.OnPodsChange, "NodesChange": sdk.OnNodesChange}

// Events is the bit set of the named events; an unknown name is an error.
func (r *ExpectRecheck) Events() (sdk.RecheckEvent, error) {
	var e sdk.RecheckEvent
	for _, n := range r.On {
		b, ok := RecheckNames[n]
		if !ok {
			return 0, fmt.Errorf("recheck event %q is not one of PodUpdate, PodsChange, NodesChange", n)
		}
		e |= b
	}
	return e, nil
}

// Delay is the expected delay (0 for none).
func (r *ExpectRecheck) Delay() (time.Duration, error) {
	if r.After == "" {
		return 0, nil
	}
	return time.ParseDuration(r.After)
}

// ExpectPreBind is an expected PreBind verdict and patch. Nil maps are not
// checked; an empty one expects no key of its kind.
type ExpectPreBind struct {
	Code        int32             `json:"code"`
	Reason      string            `json:"reason,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Clock is the case's Now as a time (zero when unset).
func (c *Case) Clock() (time.Time, error) {
	if c.Now == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, c.Now)
	if err != nil {
		return time.Time{}, fmt.Errorf("now: %w (RFC 3339, like 2026-11-24T10:00:00Z)", err)
	}
	return t, nil
}

// Cluster is a case's cluster view (docs/abi.md §4.6).
type Cluster struct {
	// Nodes are every node of the snapshot, with their pods; without
	// them, the case's own nodes.
	Nodes      []sdk.NodeData               `json:"nodes,omitempty"`
	Namespaces map[string]map[string]string `json:"namespaces,omitempty"`
	// Claims, PersistentVolumes and StorageClasses are the objects
	// Cluster.VolumeClaims finds for the pod's claims (its ClaimNames, in
	// its namespace); a claim, volume or class not listed does not exist.
	Claims            []sdk.PersistentVolumeClaim `json:"claims,omitempty"`
	PersistentVolumes []sdk.PersistentVolume      `json:"persistentVolumes,omitempty"`
	StorageClasses    []sdk.StorageClass          `json:"storageClasses,omitempty"`
	// DeviceRequests and NodeDevices are what Cluster.DeviceRequests and
	// Cluster.NodeDevices answer (docs/abi.md §4.6.5): the pod's DRA
	// requests, and per node the devices of their classes, total and
	// free, as the scheduler would count them.
	DeviceRequests []sdk.DeviceRequest `json:"deviceRequests,omitempty"`
	NodeDevices    []sdk.NodeDevices   `json:"nodeDevices,omitempty"`
}

// ClusterData is the case's cluster for the native backend.
func (c *Case) ClusterData() *sdk.ClusterData {
	out := &sdk.ClusterData{}
	if c.Cluster != nil {
		out = &sdk.ClusterData{Namespaces: c.Cluster.Namespaces, Claims: c.Cluster.Claims,
			PersistentVolumes: c.Cluster.PersistentVolumes, StorageClasses: c.Cluster.StorageClasses,
			Devices: sdk.Devices{Requests: c.Cluster.DeviceRequests, Nodes: c.Cluster.NodeDevices}}
		for i := range c.Cluster.Nodes {
			out.Nodes = append(out.Nodes, &c.Cluster.Nodes[i])
		}
	}
	if len(out.Nodes) == 0 {
		for i := range c.Nodes {
			out.Nodes = append(out.Nodes, &c.Nodes[i])
		}
		if len(c.Nodes) == 0 {
			out.Nodes = []*sdk.NodeData{&c.Node}
		}
	}
	return out
}

// Expect is an expected status.
type Expect struct {
	Code   int32  `json:"code"`
	Reason string `json:"reason,omitempty"`
}

// Load reads a case file.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// Unknown fields are errors: a misspelt "Allocatble" would otherwise
	// run the case on a node without allocatable resources.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	f := &File{}
	if err := dec.Decode(f); err != nil {
		return nil, fmt.Errorf("%s: %w (the fields are those of docs/abi.md §8)", path, err)
	}
	if fp := f.FailurePolicy; fp != "" && fp != "Fail" && fp != "Ignore" {
		return nil, fmt.Errorf("%s: failurePolicy %q: want Fail or Ignore, as in policies[].failurePolicy (docs/abi.md §8)", path, fp)
	}
	for _, c := range f.Cases {
		if err := c.check(); err != nil {
			return nil, fmt.Errorf("%s: case %q: %w (docs/abi.md §8)", path, c.Name, err)
		}
	}
	return f, nil
}

// check refuses a case that mixes the one-node and several-node forms, or
// expects something of a node it does not have.
func (c *Case) check() error {
	if _, err := c.Clock(); err != nil {
		return err
	}
	if c.Recheck != nil {
		if c.PreEnqueue == nil {
			return fmt.Errorf("recheck needs preEnqueue")
		}
		if _, err := c.Recheck.Events(); err != nil {
			return err
		}
		if _, err := c.Recheck.Delay(); err != nil {
			return fmt.Errorf("recheck.after: %w", err)
		}
	}
	if len(c.Nodes) > 0 && (c.PreBind != nil || c.PostBind != nil || c.Reserve != nil) {
		return fmt.Errorf("reserve, preBind and postBind place the pod on node; they do not take nodes")
	}
	if c.Unreserve != nil && c.Reserve == nil {
		return fmt.Errorf("unreserve undoes the case's reserve: it needs reserve")
	}
	if len(c.Nodes) > 0 && c.Permit != nil {
		return fmt.Errorf("permit places the pod on node; it does not take nodes")
	}
	if c.Permit != nil && c.Permit.Wait != "" {
		if _, err := time.ParseDuration(c.Permit.Wait); err != nil {
			return fmt.Errorf("permit.wait: %w", err)
		}
	}
	if len(c.Nodes) == 0 {
		if c.Filters != nil || c.Scores != nil {
			return fmt.Errorf("filters and scores need nodes; with node, use filter and score")
		}
		return nil
	}
	if c.Filter != nil || c.Score != nil || c.Node.Name != "" {
		return fmt.Errorf("with nodes, give filters and scores by node name, not node, filter or score")
	}
	names := map[string]bool{}
	for _, n := range c.Nodes {
		if n.Name == "" || names[n.Name] {
			return fmt.Errorf("every node needs a name of its own (%q)", n.Name)
		}
		names[n.Name] = true
	}
	for name := range c.Filters {
		if !names[name] {
			return fmt.Errorf("filters names node %q, which is not in nodes", name)
		}
	}
	for name := range c.Scores {
		if !names[name] {
			return fmt.Errorf("scores names node %q, which is not in nodes", name)
		}
	}
	return nil
}

// CheckPreBind compares a PreBind outcome with its expectation and says
// how it differs ("" when it matches), for the native run and the host's.
func CheckPreBind(want *ExpectPreBind, code int32, reason string, labels, annotations map[string]string) string {
	var out []string
	if code != want.Code || (want.Reason != "" && reason != want.Reason) {
		out = append(out, fmt.Sprintf("preBind = %d %q, want %d %q", code, reason, want.Code, want.Reason))
	}
	if want.Labels != nil && !maps.Equal(labels, want.Labels) {
		out = append(out, fmt.Sprintf("preBind labels = %v, want %v", labels, want.Labels))
	}
	if want.Annotations != nil && !maps.Equal(annotations, want.Annotations) {
		out = append(out, fmt.Sprintf("preBind annotations = %v, want %v", annotations, want.Annotations))
	}
	return strings.Join(out, "; ")
}

// ObjectRead is a policy's read of a granted kind (policies[].objects[i]).
type ObjectRead struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Fields     []string `json:"fields"`
}

// SetObjects gives the native backend the case's objects of each of
// reads; the returned func makes the reads undeclared again.
func (c *Case) SetObjects(reads []ObjectRead) (reset func()) {
	for i := range reads {
		objs := []sdk.ObjectData{}
		if i < len(c.Objects) && c.Objects[i] != nil {
			objs = c.Objects[i]
		}
		sdk.SetObjects(i, objs)
	}
	return func() {
		for i := range reads {
			sdk.SetObjects(i, nil)
		}
	}
}
