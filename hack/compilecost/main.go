// Command compilecost measures what compiling a module costs wazero's
// compiler here: time and the peak RSS of a process that does nothing else,
// per module shape (the example policies from both toolchains and the
// synthetic worst cases of internal/wasmgen). Its table decides the load
// limits in host/bounds.go; docs/security.md shows a run.
//
//	go run ./hack/compilecost [module.wasm...]
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/wasmsched/wasmsched/internal/wasmgen"
)

var shapes = []struct {
	name  string
	shape wasmgen.Shape
}{
	{"100k tiny functions", wasmgen.Shape{Functions: 100_000}},
	{"300k tiny functions", wasmgen.Shape{Functions: 300_000}},
	{"1.5M tiny functions", wasmgen.Shape{Functions: 1_500_000}},
	{"1 function, 1M ops", wasmgen.Shape{Functions: 1, BodyOps: 1_000_000}},
	{"1 function, 5M ops", wasmgen.Shape{Functions: 1, BodyOps: 5_000_000}},
	{"1000 functions, 1000 ops", wasmgen.Shape{Functions: 1000, BodyOps: 1000}},
	{"1 function, 10k nested blocks", wasmgen.Shape{Functions: 1, BodyOps: 1, Nesting: 10_000}},
	{"1000 functions, 10k locals", wasmgen.Shape{Functions: 1000, Locals: 10_000}},
	{"1 function, 20k nested blocks", wasmgen.Shape{Functions: 1, BodyOps: 1, Nesting: 20_000}},
	{"1 function, 40k nested blocks", wasmgen.Shape{Functions: 1, BodyOps: 1, Nesting: 40_000}},
	{"10 functions, 4k nested blocks", wasmgen.Shape{Functions: 10, BodyOps: 1, Nesting: 4_000}},
	{"100 functions, 1k nested blocks", wasmgen.Shape{Functions: 100, BodyOps: 1, Nesting: 1_000}},
	{"1 br_table, 16k labels", wasmgen.Shape{Functions: 1, BrTable: 16_000}},
	{"1 br_table, 64k labels", wasmgen.Shape{Functions: 1, BrTable: 64_000}},
	{"1 br_table, 64k labels, 1k nested blocks", wasmgen.Shape{Functions: 1, BrTable: 64_000, Nesting: 1_000}},
	{"100 br_tables, 16k labels", wasmgen.Shape{Functions: 100, BrTable: 16_000}},
	{"100k globals", wasmgen.Shape{Globals: 100_000}},
	{"1M globals", wasmgen.Shape{Globals: 1_000_000}},
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "-child" {
		child(os.Args[2])
		return
	}
	dir, err := os.MkdirTemp("", "compilecost")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	type item struct{ name, path string }
	var items []item
	for _, p := range os.Args[1:] {
		items = append(items, item{filepath.Base(filepath.Dir(p)) + "/" + filepath.Base(p), p})
	}
	for i, s := range shapes {
		p := filepath.Join(dir, fmt.Sprintf("%d.wasm", i))
		if err := os.WriteFile(p, wasmgen.Module(s.shape), 0o644); err != nil {
			panic(err)
		}
		items = append(items, item{s.name, p})
	}
	fmt.Println("| module | wasm bytes | compile | peak RSS | RSS per wasm byte |")
	fmt.Println("|---|---|---|---|---|")
	for _, it := range items {
		st, _ := os.Stat(it.path)
		cmd := exec.Command(os.Args[0], "-child", it.path)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			fmt.Printf("| %s | %d | failed: %v | | |\n", it.name, st.Size(), err)
			continue
		}
		rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss * 1024
		fmt.Printf("| %s | %d | %s | %d MiB | %.0f |\n", it.name, st.Size(), string(out), rss>>20, float64(rss)/float64(st.Size()))
	}
}

// child compiles one module and prints the time it took.
func child(path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
	start := time.Now()
	if _, err := rt.CompileModule(ctx, b); err != nil {
		fmt.Printf("error after %s: %v", time.Since(start).Round(time.Millisecond), err)
		return
	}
	fmt.Print(time.Since(start).Round(time.Millisecond))
}
