//go:build norace

package policies

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/casetable"
)

func TestExamplePoliciesAsWasm(t *testing.T) {
	root, err := testguests.Root()
	if err != nil {
		t.Fatal(err)
	}
	engine, err := host.NewEngine(host.EngineOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	// The same modules run as uploaded, stopped by close-on-context-done
	// (how the host ran before it instrumented modules): every verdict and
	// score must be the same.
	plain, err := host.NewEngine(host.EngineOptions{CacheDir: t.TempDir(), Interruption: host.InterruptCloseOnDone})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	for _, tc := range testguests.Toolchains {
		for _, name := range testguests.Policies {
			t.Run(string(tc)+"/"+name, func(t *testing.T) {
				file, err := casetest.Load(filepath.Join(root, "plugins-wasm", name, "testdata.json"))
				if err != nil {
					t.Fatal(err)
				}
				wasm := testguests.PolicyBytes(t, tc, name)
				r, err := casetable.RunModule(context.Background(), engine, host.PolicySpec{Name: name, Timeout: time.Second, MaxInstances: 4}, wasm, file)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s built with %s: %d bytes, exports %s, loaded in %s", name, tc, r.Size, r.Exports, r.LoadDuration)
				for _, f := range r.Failures() {
					t.Error(f)
				}
				r2, err := casetable.RunModule(context.Background(), plain, host.PolicySpec{Name: name, Timeout: time.Second, MaxInstances: 4}, wasm, file)
				if err != nil {
					t.Fatal(err)
				}
				if a, b := reportJSON(t, r), reportJSON(t, r2); a != b {
					t.Errorf("instrumented and plain modules disagree:\ninstrumented: %s\nplain:        %s", a, b)
				}
				// A gate, a patch or a reservation alone (freeze-window,
				// placement-recorder, licence-count) has no Filter or
				// Score, so no batch form and no node table: its cases
				// check preenqueue, prebind or reserve.
				if ex := strings.Split(r.Exports, ","); !slices.Contains(ex, "filter") && !slices.Contains(ex, "score") {
					if len(r.Batches) != 0 || r.TableBatches != 0 || !slices.Contains(ex, "preenqueue") && !slices.Contains(ex, "prebind") && !slices.Contains(ex, "reserve") && !slices.Contains(ex, "permit") {
						t.Errorf("%s exports %s, batches %v, %d table batches: want a gate, a patch or a reservation and no batch form", name, r.Exports, r.Batches, r.TableBatches)
					}
					t.Log(r.Summary())
					return
				}
				// An SDK guest learns in its first batch what it reads and
				// then gets it in its node table (ABI v2): the batch forms
				// above ran from the table, and agreed with single calls.
				// node-health and team-pod-cap read only lists (conditions,
				// the node's pods), which no column carries: they declare no
				// table and run every batch with host calls.
				if listsOnly := name == "node-health" || name == "team-pod-cap"; listsOnly != (r.TableBatches == 0) {
					t.Errorf("%s ran %d batches from its node table, want none only for policies reading lists alone", name, r.TableBatches)
				}
				t.Logf("%d batch calls from the node table", r.TableBatches)
				if len(r.Batches) == 0 {
					t.Errorf("%s has no batch forms: the SDK exports filter_nodes or score_nodes for every policy", name)
				}
				t.Log(r.Summary())
			})
		}
	}
}

// A policy's other case tables (testdata-*.json: the same module under
// another config) replay against its compiled modules too.
func TestOtherCaseTablesAsWasm(t *testing.T) {
	root, err := testguests.Root()
	if err != nil {
		t.Fatal(err)
	}
	engine, err := host.NewEngine(host.EngineOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	tables := 0
	for _, name := range testguests.Policies {
		extra, err := filepath.Glob(filepath.Join(root, "plugins-wasm", name, "testdata-*.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range extra {
			tables++
			for _, tc := range testguests.Toolchains {
				t.Run(string(tc)+"/"+name+"/"+filepath.Base(path), func(t *testing.T) {
					file, err := casetest.Load(path)
					if err != nil {
						t.Fatal(err)
					}
					r, err := casetable.RunModule(context.Background(), engine, host.PolicySpec{Name: name, Timeout: time.Second, MaxInstances: 4}, testguests.PolicyBytes(t, tc, name), file)
					if err != nil {
						t.Fatal(err)
					}
					for _, f := range r.Failures() {
						t.Error(f)
					}
					t.Log(r.Summary())
				})
			}
		}
	}
	if tables == 0 {
		t.Error("no testdata-*.json table found; team-isolation has one (spill and require)")
	}
}

// The examples that read granted objects (lease-freshness) replay their
// case tables against their compiled modules too, each case's objects
// given to the module and to the plugin as the scheduler's watch would
// hold them. They are not among testguests.Policies: the many-policy
// tests run those without grants.
func TestObjectPoliciesAsWasm(t *testing.T) {
	root, err := testguests.Root()
	if err != nil {
		t.Fatal(err)
	}
	engine, err := host.NewEngine(host.EngineOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	for _, tc := range testguests.Toolchains {
		for _, name := range []string{"lease-freshness", "node-drain"} {
			t.Run(string(tc)+"/"+name, func(t *testing.T) {
				file, err := casetest.Load(filepath.Join(root, "plugins-wasm", name, "testdata.json"))
				if err != nil {
					t.Fatal(err)
				}
				r, err := casetable.RunModule(context.Background(), engine, host.PolicySpec{Name: name, Timeout: time.Second, MaxInstances: 4}, testguests.PolicyBytes(t, tc, name), file)
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range r.Failures() {
					t.Error(f)
				}
				if len(r.Cases) != len(file.Cases) {
					t.Errorf("%d cases ran, want %d", len(r.Cases), len(file.Cases))
				}
				t.Log(r.Summary())
			})
		}
	}
}
