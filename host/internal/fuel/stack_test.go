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
// after a call it is what it was before plus what the stack check granted
// (the host sets it again before each call, through StackExport), each
// call of the same depth meets the check at the same rooms, a
// tail-recursive loop a million deep never meets it, and the plain
// recursion of the same module does.
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
	if !ok {
		t.Fatalf("the stack room is not exported as a mutable global %q", StackExport)
	}
	call := func(name string, args ...uint64) []int32 {
		t.Helper()
		rooms = nil
		room.Set(StackStart / StackUnit)
		res, err := m.ExportedFunction(name).Call(ctx, args...)
		if err != nil {
			t.Fatalf("%s%v: %v", name, args, err)
		}
		want := int64(StackStart / StackUnit)
		for _, r := range rooms {
			want += grant - int64(r)
		}
		if got := int64(int32(room.Get())); got != want {
			t.Fatalf("%s%v: the room is %d after the call, want %d (%d at its start and the grants of %d checks)", name, args, got, want, StackStart/StackUnit, len(rooms))
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
	if got := call("tail", 1_000_000, 0); len(got) != 0 {
		t.Fatalf("a tail-recursive loop met the stack check %d times, want none", len(got))
	}
}
