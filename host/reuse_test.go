package host

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
	"github.com/wasmsched/wasmsched/host/internal/hostabi"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// poolNodes builds n nodes drawn from a few pool templates (team and zone
// labels, a taint, a GPU, a cordon, allocatable), each with its own name
// and 0-2 pods of two sizes, as node pools are: many nodes, few distinct
// rows.
func poolNodes(rng *rand.Rand, n int) []fwk.NodeInfo {
	type pool struct {
		team, zone, cpu, gpu string
		taint, cordoned      bool
	}
	pools := []pool{
		{"a", "z1", "8", "", false, false},
		{"a", "z2", "16", "", false, false},
		{"b", "z1", "8", "", true, false},
		{"", "z2", "4", "", false, false},
		{"", "z3", "32", "2", true, false},
		{"b", "z3", "8", "", false, true},
	}
	out := make([]fwk.NodeInfo, n)
	for i := range out {
		p := pools[rng.Intn(len(pools))]
		name := fmt.Sprintf("node-%03d", i)
		b := st.MakeNode().Name(name).Unschedulable(p.cordoned).Label("topology.kubernetes.io/zone", p.zone).Label("pool", p.zone+p.cpu)
		capacity := map[v1.ResourceName]string{v1.ResourceCPU: p.cpu, v1.ResourceMemory: "32Gi", v1.ResourcePods: "110"}
		if p.team != "" {
			b.Label("team", p.team)
		}
		if p.gpu != "" {
			capacity["nvidia.com/gpu"] = p.gpu
			b.Label("gpu.model", "a100")
		}
		if p.taint {
			b.Taints([]v1.Taint{{Key: "dedicated", Value: "batch", Effect: v1.TaintEffectNoSchedule}})
		}
		b.Capacity(capacity)
		var pods []*v1.Pod
		for k := range rng.Intn(3) {
			size := []string{"500m", "2"}[rng.Intn(2)]
			pods = append(pods, st.MakePod().Namespace("default").Name(fmt.Sprintf("%s-p%d", name, k)).UID(fmt.Sprintf("%s-p%d", name, k)).
				Label("app", "web").Req(map[v1.ResourceName]string{v1.ResourceCPU: size, v1.ResourceMemory: "1Gi"}).Node(name).Obj())
		}
		ni := intree.NewNodeInfo(pods...)
		ni.SetNode(b.Obj())
		out[i] = ni
	}
	return out
}

// reusePods are the pods the shared-rows tests schedule.
func reusePods() []*v1.Pod {
	return []*v1.Pod{
		st.MakePod().Namespace("default").Name("web").UID("web").Label("team", "a").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1", v1.ResourceMemory: "2Gi"}).Obj(),
		st.MakePod().Namespace("default").Name("batch").UID("batch").Label("team", "b").Toleration("dedicated").Req(map[v1.ResourceName]string{v1.ResourceCPU: "3", v1.ResourceMemory: "1Gi"}).Obj(),
		st.MakePod().Namespace("default").Name("plain").UID("plain").Req(map[v1.ResourceName]string{v1.ResourceCPU: "100m"}).Obj(),
	}
}

// runBatches runs one scheduling cycle's Filter or Score of pod over the
// nodes in batches of 32, as the plugin does (PreFilter or PreScore
// first, when the module has it), and returns every node's verdict and
// score.
func runBatches(t *testing.T, v *Version, kind CallKind, pod *v1.Pod, nodes []fwk.NodeInfo) ([]Result, []int64) {
	t.Helper()
	ctx := context.Background()
	ps, pc := NewPodState(pod), &PolicyCycle{}
	pre := CallPreFilter
	if kind == CallScore {
		pre = CallPreScore
	}
	if v.Exports().Has(pre) {
		if _, res, cerr := v.Call(ctx, pre, ps, nil, pc, nil); cerr != nil {
			t.Fatalf("%s: %v", pre, cerr)
		} else if res.Code != abi.CodeSuccess {
			return []Result{res}, nil // the pod was decided before the nodes
		}
	}
	results := make([]Result, len(nodes))
	var scores []int64
	if kind == CallScore {
		scores = make([]int64, len(nodes))
	}
	for lo := 0; lo < len(nodes); lo += 32 {
		hi := min(lo+32, len(nodes))
		var sc []int64
		if scores != nil {
			sc = scores[lo:hi]
		}
		if _, cerr := v.CallNodes(ctx, kind, ps, nodes[lo:hi], pc, results[lo:hi], sc); cerr != nil {
			t.Fatalf("%s nodes %d-%d: %v", kind, lo, hi, cerr)
		}
	}
	return results, scores
}

// Nodes of one pool share a row, and a batch evaluates each distinct row
// once; every node still gets the verdict and score it gets with sharing
// off (verdictReuse: Disabled), for the example policies and the ports
// that read a node alone, built with both toolchains. Policies that read
// outside their rows (a node's pods, its image list) are caught and
// evaluated node by node, with the same verdicts.
func TestSharedRowsSameVerdicts(t *testing.T) {
	policies := []struct {
		name, config string
		shares       bool // its rows are shared on this cluster (it reads only table columns)
	}{
		{"team-isolation", "key=team", true},
		{"bin-packing", "cpu=1,memory=1", true},
		{"node-health", "", false},
		{"gpu-fit", "resource=nvidia.com/gpu", false},
		{"maintenance-avoidance", "", false},
		{"team-pod-cap", "max=1", false},
		{"ports/tainttoleration", "", false},
		{"ports/noderesourcesfit", "", true}, // learns its Score columns after its Filter ones
		{"ports/nodeaffinity", "", false},
		{"ports/balancedallocation", "", false},
		{"ports/nodeunschedulable", "", false},
		{"ports/nodename", "", false},
		{"ports/imagelocality", "", false},
	}
	rng := rand.New(rand.NewSource(7))
	nodes := poolNodes(rng, 96)
	e := newEngine(t)
	for _, tc := range testguests.Toolchains {
		for _, pol := range policies {
			wasm := testguests.PolicyBytes(t, tc, pol.name)
			reads := make([]string, 0, len(fields.Scopes))
			for _, s := range fields.Scopes {
				reads = append(reads, string(s))
			}
			spec := PolicySpec{Name: pol.name, Config: pol.config, Reads: reads, MaxInstances: 1}
			on := load(t, newPolicy(t, e, spec), wasm)
			spec.NoReuse = true
			off := load(t, newPolicy(t, e, spec), wasm)
			for _, kind := range []CallKind{CallFilter, CallScore} {
				if !on.Exports().Has(abi.Points[kind].Batch) {
					continue
				}
				// Twice: the first cycle shows the SDK what the policy reads,
				// the second runs from the table.
				for round := 0; round < 2; round++ {
					for _, pod := range reusePods() {
						gotR, gotS := runBatches(t, on, kind, pod, nodes)
						wantR, wantS := runBatches(t, off, kind, pod, nodes)
						for i := range wantR {
							if gotR[i] != wantR[i] || gotS != nil && gotR[i].Code == abi.CodeSuccess && gotS[i] != wantS[i] {
								t.Fatalf("%s/%s %s pod %s node %d: shared %+v (score %v), alone %+v (score %v)", tc, pol.name, kind, pod.Name, i, gotR[i], at(gotS, i), wantR[i], at(wantS, i))
							}
						}
					}
				}
			}
			evaluated, shared, remembered := on.p.RowStats()
			if _, offShared, offRemembered := off.p.RowStats(); offShared != 0 || offRemembered != 0 {
				t.Errorf("%s/%s: %d nodes shared a row, %d remembered, with verdictReuse Disabled", tc, pol.name, offShared, offRemembered)
			}
			t.Logf("%s/%s: rows evaluated %d, shared %d, remembered %d; still sharing: %v", tc, pol.name, evaluated, shared, remembered, on.SharesRows())
			if pol.shares && (shared == 0 || !on.SharesRows()) {
				t.Errorf("%s/%s reads only its table, yet shared %d rows (still sharing: %v)", tc, pol.name, shared, on.SharesRows())
			}
		}
	}
}

func at(s []int64, i int) any {
	if s == nil {
		return "-"
	}
	return s[i]
}

// A policy whose verdicts depend on state it keeps (the counter test
// guest rejects every second node it evaluates, whatever the node) is
// evaluated node by node when it says so with sdk.KeepsState, or when its
// args disable reuse; one that keeps state without saying so shares its
// rows, which is what the contract (docs/abi.md §3.4) warns about.
func TestKeepsStateIsNeverShared(t *testing.T) {
	nodes := make([]fwk.NodeInfo, 32)
	for i := range nodes {
		nodes[i] = nodeInfo(fmt.Sprintf("n%02d", i), map[string]string{"pool": "a"}, false)
	}
	e := newEngine(t)
	for _, tc := range testguests.Toolchains {
		wasm := testguests.PolicyBytes(t, tc, "testdata/counter")
		for _, c := range []struct {
			declare, noReuse, shared, viaCycle bool
		}{
			{declare: true},
			{noReuse: true},
			{shared: true},
			{viaCycle: true}, // a Filter that writes the cycle state: seen by the host
		} {
			config := fmt.Sprintf("declare=%v", c.declare)
			if c.viaCycle {
				config += ",via=cycle"
			}
			v := load(t, newPolicy(t, e, PolicySpec{Config: config, NoReuse: c.noReuse, MaxInstances: 1}), wasm)
			if v.Exports().KeepsState != c.declare {
				t.Fatalf("%s %+v: KeepsState %v", tc, c, v.Exports().KeepsState)
			}
			filterNodes(t, v, testPod(), nodes...) // learns its column: 32 nodes evaluated
			got := filterNodes(t, v, testPod(), nodes...)
			rejected := 0
			for _, r := range got {
				if r.Code == abi.CodeUnschedulable {
					rejected++
				}
			}
			_, shared, remembered := v.p.RowStats()
			shared += remembered
			if c.shared {
				if rejected != 0 || shared != 31 {
					t.Errorf("%s, undeclared: %d of 32 rejected, %d shared; want the one row's Success for all 32, 31 shared", tc, rejected, shared)
				}
				continue
			}
			if rejected != 16 || shared != 0 {
				t.Errorf("%s %+v: %d of 32 rejected, %d shared; want every second node rejected, none shared", tc, c, rejected, shared)
			}
		}
	}
}

// A version whose batches find no rows to share stops grouping them (it
// costs a hash per node) but for one batch in groupProbe, and groups every
// batch again once that one shares a row.
func TestGroupingBacksOff(t *testing.T) {
	v := load(t, newPolicy(t, newEngine(t), PolicySpec{Name: "team", Config: "key=team", MaxInstances: 1}), testguests.PolicyBytes(t, testguests.TinyGo, "team-isolation"))
	distinct, pool := make([]fwk.NodeInfo, 32), make([]fwk.NodeInfo, 32)
	for i := range distinct {
		distinct[i] = nodeInfo(fmt.Sprintf("d%02d", i), map[string]string{"team": fmt.Sprint("t", i)}, false)
		pool[i] = nodeInfo(fmt.Sprintf("p%02d", i), map[string]string{"team": "a"}, false)
	}
	batch := func(nodes []fwk.NodeInfo) int64 {
		_, before, _ := v.p.RowStats()
		results := make([]Result, len(nodes))
		if _, _, cerr := v.callNodes(context.Background(), CallFilter, testPod(), nodes, new(PolicyCycle), results, nil); cerr != nil {
			t.Fatal(cerr)
		}
		_, after, _ := v.p.RowStats()
		return after - before
	}
	for range 1 + groupIdleAfter { // the first shows the SDK its column
		batch(distinct)
	}
	if shared := batch(pool); shared != 0 {
		t.Fatalf("after %d batches that shared nothing, the next shared %d rows: still grouping", groupIdleAfter, shared)
	}
	probed := false
	for i := 0; i < groupProbe; i++ {
		if batch(pool) == 31 {
			probed = true
			break
		}
	}
	if !probed {
		t.Fatalf("no batch of %d grouped its rows again", groupProbe)
	}
	for i := range 3 {
		if shared := batch(pool); shared != 31 {
			t.Fatalf("batch %d after a probe that shared: %d rows shared, want 31", i, shared)
		}
	}
}

// Verdicts remembered across cycles follow the cluster and the policy: a
// randomized sequence of node changes (labels, cordons, pods added and
// removed), reloads of a policy's module, changes of its config, and
// cycles of pods of a few templates (each pod with its own name, UID and
// "signature" label, and some with a zone label) gives, after every step,
// the verdicts and scores of the same policy with reuse off.
func TestRememberedVerdictsFollowTheCluster(t *testing.T) {
	policies := []struct {
		name    string
		configs [2]string // a step may switch between the two
	}{
		{"team-isolation", [2]string{"key=team", "key=topology.kubernetes.io/zone"}},
		{"bin-packing", [2]string{"cpu=1,memory=1", "cpu=1,memory=3"}},
		{"gpu-fit", [2]string{"resource=nvidia.com/gpu", "resource=cpu"}},
		{"ports/noderesourcesfit", [2]string{"", ""}},
		{"ports/balancedallocation", [2]string{"", ""}},
		{"ports/nodeunschedulable", [2]string{"", ""}},
	}
	rng := rand.New(rand.NewSource(11))
	nodes := poolNodes(rng, 64)
	e := newEngine(t)
	type pair struct {
		on, off *Version
		wasm    []byte
		configs [2]string
		config  int
		stats   [3]int64 // the row counts of the policies replaced so far
	}
	var loaded []*pair
	load2 := func(l *pair, name string) {
		spec := PolicySpec{Name: name, Config: l.configs[l.config], MaxInstances: 2}
		l.on = load(t, newPolicy(t, e, spec), l.wasm)
		spec.NoReuse = true
		l.off = load(t, newPolicy(t, e, spec), l.wasm)
	}
	for _, tc := range testguests.Toolchains {
		for _, pol := range policies {
			l := &pair{wasm: testguests.PolicyBytes(t, tc, pol.name), configs: pol.configs}
			load2(l, pol.name)
			loaded = append(loaded, l)
		}
	}
	templates := reusePods()
	uid := 0
	reloads, reconfigs, inPlace := 0, 0, 0
	for step := 0; step < 80; step++ {
		switch rng.Intn(8) {
		case 0: // the module loaded again: a new version, nothing remembered
			l := loaded[rng.Intn(len(loaded))]
			l.on, l.off = load(t, l.on.p, l.wasm), load(t, l.off.p, l.wasm)
			reloads++
		case 1: // the config changed: the plugin makes a new policy
			l := loaded[rng.Intn(len(loaded))]
			ev, sh, re := l.on.p.RowStats()
			l.stats[0], l.stats[1], l.stats[2] = l.stats[0]+ev, l.stats[1]+sh, l.stats[2]+re
			l.config = 1 - l.config
			load2(l, l.on.p.name)
			reconfigs++
		}
		// Change the cluster: a new NodeInfo (a new generation) for one node.
		i := rng.Intn(len(nodes))
		old := nodes[i]
		n := old.Node().DeepCopy()
		pods := make([]*v1.Pod, 0, len(old.GetPods())+1)
		for _, p := range old.GetPods() {
			pods = append(pods, p.GetPod())
		}
		switch rng.Intn(4) {
		case 0:
			n.Labels["team"] = []string{"a", "b", "c"}[rng.Intn(3)]
		case 1:
			n.Spec.Unschedulable = !n.Spec.Unschedulable
		case 2:
			uid++
			pods = append(pods, st.MakePod().Namespace("default").Name(fmt.Sprintf("added-%d", uid)).UID(fmt.Sprintf("added-%d", uid)).
				Req(map[v1.ResourceName]string{v1.ResourceCPU: "1", v1.ResourceMemory: "2Gi"}).Node(n.Name).Obj())
		case 3:
			if len(pods) > 0 {
				pods = pods[1:]
			}
		}
		ni := intree.NewNodeInfo(pods...)
		ni.SetNode(n)
		if rng.Intn(2) == 0 {
			nodes[i] = ni
		} else {
			// In place, as kube-scheduler's snapshot updates its NodeInfos:
			// the same object at a new generation.
			reflect.ValueOf(old).Elem().Set(reflect.ValueOf(ni).Elem())
			inPlace++
		}
		// A cycle of a new pod of a random template.
		uid++
		pod := templates[rng.Intn(len(templates))].DeepCopy()
		pod.Name, pod.UID = fmt.Sprintf("%s-%d", pod.Name, uid), types.UID(fmt.Sprint("pod-", uid))
		// A label of its own that no policy reads (scheduler_perf's), and
		// now and then a zone label, which team-isolation reads with its
		// second config: pods of one template then differ in a label read.
		pod.Labels = maps.Clone(pod.Labels)
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels["signature"] = fmt.Sprint("signature-label-", uid)
		if rng.Intn(3) == 0 {
			pod.Labels["topology.kubernetes.io/zone"] = []string{"z1", "z2", "z3"}[rng.Intn(3)]
		}
		for _, l := range loaded {
			for _, kind := range []CallKind{CallFilter, CallScore} {
				if !l.on.Exports().Has(abi.Points[kind].Batch) {
					continue
				}
				gotR, gotS := runBatches(t, l.on, kind, pod, nodes)
				wantR, wantS := runBatches(t, l.off, kind, pod, nodes)
				for k := range wantR {
					if gotR[k] != wantR[k] || gotS != nil && gotR[k].Code == abi.CodeSuccess && gotS[k] != wantS[k] {
						t.Fatalf("step %d, %s %s, pod %s, node %s: reused %+v (score %v), evaluated %+v (score %v)",
							step, l.on.p.name, kind, pod.Name, nodes[k].Node().Name, gotR[k], at(gotS, k), wantR[k], at(wantS, k))
					}
				}
			}
		}
	}
	t.Logf("%d reloads, %d config changes, %d nodes changed in place", reloads, reconfigs, inPlace)
	batches := 0
	for _, l := range loaded {
		evaluated, shared, remembered := l.on.p.RowStats()
		t.Logf("%s: evaluated %d, shared %d, remembered %d", l.on.p.name, evaluated+l.stats[0], shared+l.stats[1], remembered+l.stats[2])
		l.on.memo.mu.RLock()
		for _, tb := range l.on.memo.tables {
			tb.mu.RLock()
			batches += len(tb.batches)
			tb.mu.RUnlock()
		}
		l.on.memo.mu.RUnlock()
	}
	// Whole batches were taken too (memoBatch), not only rows.
	if batches == 0 {
		t.Error("no batch was remembered whole")
	}
}

// A version's memo is bounded: the oldest pod template goes when there
// are maxMemoKeys, or when the rows held pass maxMemoBytes; an evicted
// table a call still holds takes no more rows. A key gets a table only
// when a second pod cycle meets it, the keys met once are bounded and
// charged, the engine's total bounds every memo, and a retired version's
// memo gives its bytes back.
func TestMemoIsBounded(t *testing.T) {
	var m verdictMemo
	e := &Engine{memoCap: maxEngineMemoBytes, budget: newMemoryBudget(0, theProcess)}
	e.budget.memo = &e.memoBytes
	engine := &e.memoBytes
	pod := func(i int) *PodState {
		return NewPodState(st.MakePod().Namespace("default").Label("template", fmt.Sprint(i)).Obj())
	}
	cycle := uint64(0)
	admit := func(p *PodState, k memoKey) *memoTable {
		return m.admit(CallFilter, p, &hostabi.PodReadSet{Labels: []string{"template"}}, cycle, func() memoKey { return k }, e)
	}
	table := func(i int, k memoKey) *memoTable {
		p := pod(i)
		cycle++
		for batch := range 2 {
			if admit(p, k) != nil {
				t.Fatalf("template %d has a table in its first cycle's batch %d", i, batch)
			}
		}
		cycle++
		return admit(p, k)
	}
	first := table(-1, memoKey{pod: [32]byte{1}})
	if first == nil {
		t.Fatal("no table in a template's second cycle")
	}
	for i := 0; i < maxMemoKeys+10; i++ {
		table(i, memoKey{pod: [32]byte{byte(i), byte(i >> 8), 2}})
	}
	if len(m.tables) != maxMemoKeys || len(m.order) != maxMemoKeys {
		t.Fatalf("%d tables (%d in order), want %d", len(m.tables), len(m.order), maxMemoKeys)
	}
	if !first.full {
		t.Error("the evicted table still takes rows")
	}
	for i := 0; i < 3*maxMemoSeen; i++ {
		cycle++
		m.hits.Add(1) // a memo that finds verdicts: its probe window stays open
		admit(pod(1000+i), memoKey{pod: [32]byte{byte(i), byte(i >> 8), 3}})
		if len(m.seen) > maxMemoSeen {
			t.Fatalf("%d templates kept, want at most %d", len(m.seen), maxMemoSeen)
		}
		if want := int64(len(m.seen)) * seenEntryBytes; m.bytes.Load() < want {
			t.Fatalf("the memo is charged %d bytes for %d templates seen, want at least %d", m.bytes.Load(), len(m.seen), want)
		}
	}
	m.bytes.Add(maxMemoBytes + 1)
	table(9999, memoKey{pod: [32]byte{9, 9, 9}})
	if len(m.tables) != 1 {
		t.Errorf("over maxMemoBytes: %d tables left, want only the new one", len(m.tables))
	}
	m.bytes.Add(-(maxMemoBytes + 1))

	engine.Add(maxEngineMemoBytes + 1)
	if table(7777, memoKey{pod: [32]byte{7, 7, 7}}) != nil {
		t.Error("a new table while the engine's memos hold more than maxEngineMemoBytes")
	}
	engine.Add(-(maxEngineMemoBytes + 1))

	last := table(8888, memoKey{pod: [32]byte{8, 8, 8}})
	last.bytes = 1000
	m.bytes.Add(1000)
	engine.Add(1000)
	m.drop(engine)
	if engine.Load() != 0 || m.bytes.Load() != 0 || len(m.tables) != 0 {
		t.Errorf("dropped memo: engine holds %d bytes, memo %d in %d tables, want none", engine.Load(), m.bytes.Load(), len(m.tables))
	}
	p := pod(6666)
	for range 3 {
		cycle++
		if admit(p, memoKey{pod: [32]byte{6}}) != nil {
			t.Fatal("a dropped memo made a table")
		}
	}
}

// A cycle whose budget has stopped (another call of the policy failed)
// gets the stop, not remembered verdicts: the policy's failure decides
// for the rest of the cycle, as without reuse.
func TestStoppedCycleTakesNothingRemembered(t *testing.T) {
	v := load(t, newPolicy(t, newEngine(t), PolicySpec{Name: "team", Config: "key=team", MaxInstances: 1}), testguests.PolicyBytes(t, testguests.TinyGo, "team-isolation"))
	nodes := poolNodes(rand.New(rand.NewSource(3)), 32)
	pod := reusePods()[0]
	for range 4 {
		runBatches(t, v, CallFilter, pod, nodes) // learns its column, meets the key, fills the memo, takes from it
	}
	if _, _, remembered := v.p.RowStats(); remembered == 0 {
		t.Fatal("nothing remembered")
	}
	pc := &PolicyCycle{Budget: NewBudget(time.Second)}
	pc.Budget.Stop(&CallError{Outcome: OutcomeTimeout, Err: context.DeadlineExceeded})
	results := make([]Result, len(nodes))
	if _, cerr := v.CallNodes(context.Background(), CallFilter, NewPodState(pod), nodes, pc, results, nil); cerr == nil || cerr.Outcome != OutcomeStopped {
		t.Fatalf("stopped cycle: %v, want OutcomeStopped", cerr)
	}
}

// Within one cycle a row evaluated in one batch is not evaluated again in
// a later batch (docs/abi.md §3.4), for a pod the memo does not take yet
// (its template's first cycle) as for one it does; with the real clock,
// time passes between batches, and each batch evaluates its own rows.
func TestCycleSharesRowsAcrossBatches(t *testing.T) {
	nodes := make([]fwk.NodeInfo, 96) // three batches, one row
	for i := range nodes {
		nodes[i] = nodeInfo(fmt.Sprintf("n%02d", i), map[string]string{"team": "a"}, false)
	}
	e := newEngine(t)
	wasm := testguests.PolicyBytes(t, testguests.TinyGo, "team-isolation")
	for _, realClock := range []bool{false, true} {
		v := load(t, newPolicy(t, e, PolicySpec{Name: "team-isolation", Config: "key=team", MaxInstances: 1, RealClock: realClock}), wasm)
		// The first cycle shows the SDK what the policy reads; the rows
		// are in a table from the next one on.
		runBatches(t, v, CallFilter, st.MakePod().Namespace("default").Name("learn").UID("learn").Label("team", "a").Obj(), nodes)
		before, _, _ := v.p.RowStats()
		pod := st.MakePod().Namespace("own").Name("fresh").UID("fresh").Label("team", "a").Obj() // a template of its own
		results, _ := runBatches(t, v, CallFilter, pod, nodes)
		for i, r := range results {
			if r.Code != abi.CodeSuccess {
				t.Fatalf("realClock %v: node %d: %+v, want Success", realClock, i, r)
			}
		}
		evaluated, _, _ := v.p.RowStats()
		want := int64(1) // one row, once per cycle
		if realClock {
			want = 3 // once per batch
		}
		if got := evaluated - before; got != want {
			t.Errorf("realClock %v: %d rows evaluated in a cycle of 3 batches of one row, want %d", realClock, got, want)
		}
	}
}

// A version whose cycles found nothing to share (every row distinct) looks
// again in one cycle of cycleProbe, and shares again from the first cycle
// that finds a row: the back-off comes back (it could not when it counted
// batches, docs/architecture.md RATIONALE).
func TestCycleSharingComesBack(t *testing.T) {
	distinct := make([]fwk.NodeInfo, 96)
	same := make([]fwk.NodeInfo, 96)
	for i := range distinct {
		distinct[i] = nodeInfo(fmt.Sprintf("d%02d", i), map[string]string{"team": fmt.Sprintf("t%02d", i)}, false)
		same[i] = nodeInfo(fmt.Sprintf("s%02d", i), map[string]string{"team": "a"}, false)
	}
	e := newEngine(t)
	v := load(t, newPolicy(t, e, PolicySpec{Name: "team-isolation", Config: "key=team", MaxInstances: 1}), testguests.PolicyBytes(t, testguests.TinyGo, "team-isolation"))
	n := 0
	fresh := func() *v1.Pod { // a pod of a template of its own: its namespace is
		n++
		return st.MakePod().Namespace(fmt.Sprint("ns-", n)).Name(fmt.Sprint("p", n)).UID(fmt.Sprint("p", n)).Label("team", "a").Obj()
	}
	for range cycleIdleAfter + 2 {
		runBatches(t, v, CallFilter, fresh(), distinct)
	}
	if v.cycleSharing[0].idle.Load() < cycleIdleAfter {
		t.Fatalf("%d idle cycles after %d cycles of distinct rows, want %d", v.cycleSharing[0].idle.Load(), cycleIdleAfter+2, cycleIdleAfter)
	}
	for c := 1; c <= 2*cycleProbe; c++ {
		before, _, _ := v.p.RowStats()
		runBatches(t, v, CallFilter, fresh(), same)
		if evaluated, _, _ := v.p.RowStats(); evaluated-before == 1 {
			if c > cycleProbe+1 {
				t.Errorf("sharing came back in cycle %d, want within %d", c, cycleProbe+1)
			}
			before = evaluated
			runBatches(t, v, CallFilter, fresh(), same)
			if evaluated, _, _ := v.p.RowStats(); evaluated-before != 1 {
				t.Errorf("the cycle after sharing came back evaluated %d rows, want 1", evaluated-before)
			}
			return
		}
	}
	t.Fatalf("no cycle of %d shared its row after the distinct ones", 2*cycleProbe)
}

// The memo keys a pod through the labels the version's guests read
// (hostabi.PodReads), not all of them: pods that differ only in labels no
// guest reads (scheduler_perf gives every pod its own "signature" label, a
// StatefulSet its pod-name label) take each other's remembered verdicts,
// and pods that differ in a label a guest read never do, even when the
// guest first reads it in the middle of a cycle whose key was computed
// without it (labelgate reads the pod label a node's "gate" label names).
func TestMemoKeysOnTheLabelsRead(t *testing.T) {
	var open, gated1, gated2 []fwk.NodeInfo
	for i := range 8 {
		open = append(open, nodeInfo(fmt.Sprintf("open-%d", i), map[string]string{"pool": "open"}, false))
		gated1 = append(gated1, nodeInfo(fmt.Sprintf("k1-%d", i), map[string]string{"gate": "k1"}, false))
		gated2 = append(gated2, nodeInfo(fmt.Sprintf("k2-%d", i), map[string]string{"gate": "k2"}, false))
	}
	pod := func(i int, labels ...string) *v1.Pod {
		b := st.MakePod().Namespace("default").Name(fmt.Sprint("p", i)).UID(fmt.Sprint("p", i)).Label("signature", fmt.Sprint("signature-label-", i))
		for j := 0; j+1 < len(labels); j += 2 {
			b.Label(labels[j], labels[j+1])
		}
		return b.Obj()
	}
	codes := func(rs []Result) (out []int32) {
		for _, r := range rs {
			out = append(out, r.Code)
		}
		return out
	}
	for _, tc := range testguests.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			wasm := testguests.PolicyBytes(t, tc, "testdata/labelgate")
			e := newEngine(t)
			on := load(t, newPolicy(t, e, PolicySpec{Name: "labelgate", MaxInstances: 2}), wasm)
			off := load(t, newPolicy(t, e, PolicySpec{Name: "labelgate-off", MaxInstances: 2, NoReuse: true}), wasm)

			// Pods of one template but for their signature labels, over
			// nodes that have the guest read k1 only. The first cycle
			// reads k1 (the template, as the memo admits it, now has k1
			// in it), the second meets that template first, the third
			// remembers, and every later one takes what it remembered.
			nodes := append(append([]fwk.NodeInfo(nil), open...), gated1...)
			for i := range 5 {
				p := pod(i, "k1", "yes")
				got, _ := runBatches(t, on, CallFilter, p, nodes)
				want, _ := runBatches(t, off, CallFilter, p, nodes)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("cycle %d: reused %v, evaluated %v", i, got, want)
				}
			}
			if _, _, remembered := on.p.RowStats(); remembered < 2*int64(len(nodes)) {
				t.Errorf("%d verdicts remembered for pods that differ only in a label the guest never reads, want at least %d", remembered, 2*len(nodes))
			}

			// Two cycles at once, both keyed before the guest first reads
			// k2: the one that reads it remembers nothing under that key,
			// so the other, whose pod has another k2, is not answered with
			// the first pod's verdicts.
			ctx := context.Background()
			run := func(ps *PodState, pc *PolicyCycle, nodes []fwk.NodeInfo) []Result {
				t.Helper()
				res := make([]Result, len(nodes))
				if _, cerr := on.CallNodes(ctx, CallFilter, ps, nodes, pc, res, nil); cerr != nil {
					t.Fatal(cerr)
				}
				return res
			}
			a, pcA := NewPodState(pod(10, "k1", "yes", "k2", "no")), &PolicyCycle{}
			b, pcB := NewPodState(pod(11, "k1", "yes", "k2", "yes")), &PolicyCycle{}
			run(a, pcA, gated1) // a's cycle takes its memo table, keyed without k2
			if got := codes(run(b, pcB, gated2)); got[0] != abi.CodeSuccess {
				t.Fatalf("pod with k2=yes on gate=k2 nodes: %v, want Success", got)
			}
			if got := codes(run(a, pcA, gated2)); got[0] != abi.CodeUnschedulable {
				t.Fatalf("pod with k2=no on gate=k2 nodes, in a cycle keyed before k2 was read: %v, want Unschedulable (another pod's verdict was taken)", got)
			}

			// Later cycles key on k2 too, and remember again.
			nodes = append(append(append([]fwk.NodeInfo(nil), open...), gated1...), gated2...)
			before := func() int64 { _, _, r := on.p.RowStats(); return r }()
			for i := range 6 {
				p := pod(20+i, "k1", "yes", "k2", []string{"yes", "no"}[i%2])
				got, _ := runBatches(t, on, CallFilter, p, nodes)
				want, _ := runBatches(t, off, CallFilter, p, nodes)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("cycle %d (k2=%s): reused %v, evaluated %v", i, p.Labels["k2"], codes(got), codes(want))
				}
			}
			if _, _, r := on.p.RowStats(); r-before < int64(len(nodes)) {
				t.Errorf("%d verdicts remembered once k2 is in the key, want at least %d", r-before, len(nodes))
			}
		})
	}
}

// A memo that never finds a remembered verdict (every pod its own
// template) stops after memoProbeTemplates first sightings and gives back
// what it held; one that finds verdicts goes on. Its bytes are in the
// budget's use, and a budget with no room left makes it remember nothing.
func TestMemoProbeWindowAndBudget(t *testing.T) {
	e := &Engine{memoCap: memoCapOf(512 << 20), budget: newMemoryBudget(512<<20, theProcess)}
	e.budget.memo = &e.memoBytes
	if e.memoCap != 64<<20 || memoCapOf(128<<20) != 16<<20 {
		t.Fatalf("memo caps %d and %d, want 64 MiB under 512 MiB and 16 MiB under 128 MiB", e.memoCap, memoCapOf(128<<20))
	}
	reads := &hostabi.PodReadSet{Labels: []string{"template"}}
	pod := func(i int) *PodState {
		return NewPodState(st.MakePod().Namespace("default").Label("template", fmt.Sprint(i)).Obj())
	}
	var m verdictMemo
	for i := 0; i < memoProbeTemplates-1; i++ {
		m.admit(CallFilter, pod(i), reads, uint64(i), func() memoKey { return memoKey{} }, e)
	}
	if got := e.MemoryBudget().Verdicts; got != int64(memoProbeTemplates-1)*seenEntryBytes {
		t.Fatalf("the budget counts %d bytes of verdicts for %d templates seen, want %d", got, memoProbeTemplates-1, int64(memoProbeTemplates-1)*seenEntryBytes)
	}
	m.admit(CallFilter, pod(memoProbeTemplates), reads, memoProbeTemplates, func() memoKey { return memoKey{} }, e)
	if len(m.seen) != 0 || m.bytes.Load() != 0 || e.memoBytes.Load() != 0 {
		t.Fatalf("after %d templates and no hit: %d seen, %d bytes (engine %d), want the memo off and empty", memoProbeTemplates, len(m.seen), m.bytes.Load(), e.memoBytes.Load())
	}
	// Off: a template met twice gets no table.
	for c := uint64(1); c <= 3; c++ {
		if m.admit(CallFilter, pod(1), reads, 10_000+c, func() memoKey { return memoKey{} }, e) != nil {
			t.Fatal("an off memo made a table")
		}
	}
	// Back after the off period.
	m.offUntil.Store(monotonic() - 1)
	m.admit(CallFilter, pod(1), reads, 20_000, func() memoKey { return memoKey{} }, e)
	if m.admit(CallFilter, pod(1), reads, 20_001, func() memoKey { return memoKey{pod: [32]byte{1}} }, e) == nil {
		t.Fatal("the memo did not start again after its off period")
	}

	// A budget with no room: nothing more is remembered.
	e.budget.limit = e.budget.used()
	before := len(m.seen)
	m.admit(CallFilter, pod(5), reads, 30_000, func() memoKey { return memoKey{} }, e)
	if len(m.seen) != before {
		t.Error("a template was remembered beyond the memory budget")
	}
}
