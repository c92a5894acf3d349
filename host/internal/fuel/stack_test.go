package fuel

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// The stack room comes back whole however a function that calls is left:
// after a call it is what it was before, or the cap the last check set
// (less, after tail calls)
// (the host sets both again before each call, through StackExport and
// StackCapExport), and each call of the same depth meets the check at the
// same rooms. A tail call gives nothing back (wazero may make it an
// ordinary call): a tail loop a million deep meets the check as its room
// runs out.
func TestStackRoomIsBalanced(t *testing.T) {
	ctx := context.Background()
	wasm, err := os.ReadFile("testdata/stackroom.wasm")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Instrument(wasm)
	if err != nil {
		t.Fatal(err)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCoreFeatures(api.CoreFeaturesV2|experimental.CoreFeaturesTailCall))
	defer rt.Close(ctx)
	var rooms []int32
	const grant = 1000
	if err := fuelHost(ctx, rt, func() int32 { return 1 << 20 }, func(room int32) int32 {
		rooms = append(rooms, room)
		return grant
	}); err != nil {
		t.Fatal(err)
	}
	m, err := rt.Instantiate(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	room, ok := m.ExportedGlobal(StackExport).(api.MutableGlobal)
	capg, ok2 := m.ExportedGlobal(StackCapExport).(api.MutableGlobal)
	if !ok || !ok2 {
		t.Fatalf("the stack room and its cap are not exported as mutable globals %q, %q", StackExport, StackCapExport)
	}
	call := func(name string, args ...uint64) []int32 {
		t.Helper()
		rooms = nil
		room.Set(StackStart / StackUnit)
		capg.Set(StackStart / StackUnit)
		res, err := m.ExportedFunction(name).Call(ctx, args...)
		if err != nil {
			t.Fatalf("%s%v: %v", name, args, err)
		}
		want := int64(StackStart / StackUnit)
		if len(rooms) > 0 {
			want = grant
		}
		if got := int64(int32(room.Get())); got != want && !(name == "tail" && got >= 0 && got <= want) {
			t.Fatalf("%s%v: the room is %d after the call (%d checks), want %d", name, args, got, len(rooms), want)
		}
		if name != "tail" && name != "pairs" && res[0] != args[0] {
			t.Fatalf("%s%v = %d", name, args, res[0])
		}
		return slices.Clone(rooms)
	}
	for _, name := range []string{"down", "ways"} {
		first := call(name, 5000)
		if len(first) == 0 {
			t.Fatalf("%s(5000) never met the stack check", name)
		}
		for i := 0; i < 50; i++ {
			if got := call(name, 5000); !slices.Equal(got, first) {
				t.Fatalf("%s(5000), call %d: the stack check saw rooms %v, the first call %v: the room leaks", name, i+2, got[:min(len(got), 5)], first[:min(len(first), 5)])
			}
		}
		// And other calls, of other depths, in between, leave it whole.
		call("pairs", 1000)
		call("tail", 1000, 0)
		if got := call(name, 5000); !slices.Equal(got, first) {
			t.Fatalf("%s(5000) after other calls: rooms %v, want %v", name, got[:min(len(got), 5)], first[:min(len(first), 5)])
		}
	}
	if got := call("tail", 1_000_000, 0); len(got) == 0 {
		t.Fatal("a tail-recursive loop a million deep never met the stack check")
	}
}
