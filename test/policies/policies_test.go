// Package policies replays every example policy's case table (the one its
// native test uses) against the policy compiled with TinyGo and with Go,
// through the real host and real NodeInfos, with the conformance kit that
// `wasmsched test --cases` runs: expectations, and batch forms against
// single forms on every case's pod and node.
package policies

import (
	"context"
	"path/filepath"
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
				if len(r.Batches) == 0 {
					t.Errorf("%s has no batch forms: the SDK exports filter_nodes or score_nodes for every policy", name)
				}
				t.Log(r.Summary())
			})
		}
	}
}
