// Command gen-abi-docs writes the tables of docs/abi.md that are derived
// from the ABI's own tables (guest-sdk/abi: Points and HostFunctions), each
// between "<!-- BEGIN GENERATED name -->" and "<!-- END GENERATED name -->"
// markers. `make generate` runs it; with -check it only reports whether the
// file is current, which the verify gate and this package's test use.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
	"github.com/wasmsched/wasmsched/host"
)

func main() {
	check := flag.Bool("check", false, "fail if the file is stale instead of rewriting it")
	path := flag.String("file", "docs/abi.md", "the ABI document")
	flag.Parse()
	old, err := os.ReadFile(*path)
	if err != nil {
		fail(err)
	}
	out, err := render(old)
	if err != nil {
		fail(fmt.Errorf("%s: %w", *path, err))
	}
	if bytes.Equal(out, old) {
		return
	}
	if *check {
		fail(fmt.Errorf("%s is stale: run `make generate`", *path))
	}
	if err := os.WriteFile(*path, out, 0o644); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gen-abi-docs:", err)
	os.Exit(1)
}

// render replaces every generated block of doc.
func render(doc []byte) ([]byte, error) {
	sigs, err := signatures()
	if err != nil {
		return nil, err
	}
	blocks := map[string]string{"abi-points": points(), "abi-capabilities": capabilities(), "abi-results": results(), "abi-signatures": sigs, "abi-fields": fieldTable(), "abi-table-columns": tableColumns()}
	for s := range abi.SectionTitles {
		blocks[fmt.Sprintf("abi-functions-%d", s)] = functions(s)
	}
	out := string(doc)
	for name, body := range blocks {
		begin, end := "<!-- BEGIN GENERATED "+name+" -->\n", "<!-- END GENERATED "+name+" -->"
		i := strings.Index(out, begin)
		j := strings.Index(out, end)
		if i < 0 || j < i {
			return nil, fmt.Errorf("markers for %q are missing: add %q and %q where the table belongs", name, strings.TrimSpace(begin), end)
		}
		out = out[:i+len(begin)] + body + out[j:]
	}
	return []byte(out), nil
}

func code(s string) string { return "`" + s + "`" }

func points() string {
	var b strings.Builder
	b.WriteString("| entry point | signature | called | node data | batch form | capability bit |\n|---|---|---|---|---|---|\n")
	for p := abi.Point(0); p < abi.NumPoints; p++ {
		pt := abi.Points[p]
		node := "no"
		if pt.NodeData {
			node = "yes"
		}
		batch := ""
		switch {
		case pt.Batch != abi.BatchNone:
			batch = code(abi.Points[pt.Batch].Export)
		case pt.BatchOf != abi.BatchNone:
			batch = "(is the batch form of " + code(abi.Points[pt.BatchOf].Export) + ")"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %d |\n", code(pt.Export), code(abi.Signature(pt.Params, pt.Results)), pt.Called, node, batch, p.Cap())
	}
	return b.String()
}

// results is the table of what each status code means at each extension
// point (abi.ExtensionPoint.OnSkip and OnReject); batch forms read codes as
// the point they batch, so they have no column.
func results() string {
	var cols []abi.Point
	for p := abi.Point(0); p < abi.NumPoints; p++ {
		if abi.Points[p].BatchOf == abi.BatchNone {
			cols = append(cols, p)
		}
	}
	var b strings.Builder
	b.WriteString("| code |")
	for _, p := range cols {
		b.WriteString(" " + code(abi.Points[p].Export) + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(cols)) + "\n")
	for _, c := range []struct {
		code int32
		name string
	}{{abi.CodeSuccess, "Success"}, {abi.CodeError, "Error (or an unknown code)"}, {abi.CodeUnschedulable, "Unschedulable"}, {abi.CodeUnschedulableAndUnresolvable, "UnschedulableAndUnresolvable"}, {abi.CodeWait, "Wait"}, {abi.CodeSkip, "Skip"}} {
		fmt.Fprintf(&b, "| %d %s |", c.code, c.name)
		for _, p := range cols {
			b.WriteString(" " + meaning(p, c.code) + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// meaning phrases what code means at point p.
func meaning(p abi.Point, c int32) string {
	pt := abi.Points[p]
	if pt.Informational && p.Read(c) != abi.Passes {
		return "logged; nothing changes"
	}
	switch p.Read(c) {
	case abi.Passes:
		return "passes"
	case abi.Skips:
		return "its " + code(abi.Points[p+1].Export) + " is skipped for the pod"
	case abi.Rejects:
		if c == abi.CodeUnschedulable {
			return pt.Rejection + "; preemption may help"
		}
		return pt.Rejection + "; preemption will not help"
	case abi.Informs:
		return pt.Rejection
	case abi.Waits:
		return "the pod waits, for at most the returned milliseconds, until the policy allows it (§3.7)"
	case abi.RejectsUnresolvable:
		if c == abi.CodeUnschedulable {
			return pt.Rejection + " (read as UnschedulableAndUnresolvable)"
		}
		return pt.Rejection
	}
	return code("failurePolicy") + " applies"
}

func capabilities() string {
	var parts []string
	for p := abi.Point(0); p < abi.NumPoints; p++ {
		parts = append(parts, fmt.Sprintf("%s %d", abi.Points[p].Export, p.Cap()))
	}
	parts = append(parts, fmt.Sprintf("and, not a point, keeps state %d (§3.4)", abi.CapKeepsState))
	return "**Capabilities bits:** " + strings.Join(parts, ", ") + ".\n"
}

func functions(s abi.Section) string {
	var b strings.Builder
	b.WriteString("| function | signature | |\n|---|---|---|\n")
	for _, f := range abi.HostFunctions {
		if f.Section == s {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", code(f.Name), code(abi.Signature(f.Params, f.Results)), fullDoc(f))
		}
	}
	return b.String()
}

// signatures is the one table of every export a module may have and every
// import it may make, with exact wasm signatures: the host's own checks
// (exports by name and signature, the wasmsched functions, and the WASI
// allow-list with the signatures wazero implements).
func signatures() (string, error) {
	var b strings.Builder
	b.WriteString("| kind | module | name | signature | |\n|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| export | | %s | memory | required; all pointers refer to it |\n", code("memory"))
	fmt.Fprintf(&b, "| export | | %s | %s | required; returns %d to %d |\n", code(abi.ExportAbiVersion), code("() -> i32"), abi.MinVersion, abi.Version)
	fmt.Fprintf(&b, "| export | | %s | %s | optional; capability bits (§3) |\n", code(abi.ExportCapabilities), code("() -> i32"))
	fmt.Fprintf(&b, "| export | | %s | %s | optional; reactor initializer |\n", code(abi.ExportInitialize), code("() -> ()"))
	fmt.Fprintf(&b, "| export | | %s | %s | optional; used if there is no %s; must return |\n", code(abi.ExportStart), code("() -> ()"), code(abi.ExportInitialize))
	for p := abi.Point(0); p < abi.NumPoints; p++ {
		pt := abi.Points[p]
		need := "optional"
		if p == abi.Filter || p == abi.Score {
			need = "at least one of `filter`, `score`"
		}
		fmt.Fprintf(&b, "| export | | %s | %s | %s; entry point (§3) |\n", code(pt.Export), code(abi.Signature(pt.Params, pt.Results)), need)
	}
	for _, f := range abi.HostFunctions {
		fmt.Fprintf(&b, "| import | %s | %s | %s | §%s |\n", code(abi.HostModule), code(f.Name), code(abi.Signature(f.Params, f.Results)), strings.Fields(abi.SectionTitles[f.Section])[0])
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return "", err
	}
	wasi := rt.Module(wasi_snapshot_preview1.ModuleName).ExportedFunctionDefinitions()
	for _, name := range host.AllowedWASI() {
		def, ok := wasi[name]
		if !ok {
			return "", fmt.Errorf("the WASI allow-list names %s, which wazero does not implement", name)
		}
		fmt.Fprintf(&b, "| import | %s | %s | %s | WASI preview1 (§1) |\n", code(wasi_snapshot_preview1.ModuleName), code(name), code(wasmSignature(def)))
	}
	return b.String(), nil
}

// wasmSignature writes a wazero function definition the way abi.Signature
// writes the ABI's.
func wasmSignature(def api.FunctionDefinition) string {
	params := make([]abi.Param, len(def.ParamTypes()))
	for i, t := range def.ParamTypes() {
		params[i] = abi.Param{Type: abi.ValType(t)}
		if names := def.ParamNames(); i < len(names) {
			params[i].Name = names[i]
		}
	}
	results := make([]abi.ValType, len(def.ResultTypes()))
	for i, t := range def.ResultTypes() {
		results[i] = abi.ValType(t)
	}
	return abi.Signature(params, results)
}

// fullDoc is a host function's Doc and, for a numbered one, what each
// number reads (from the fields table, so numbers are written once).
func fullDoc(f abi.HostFunction) string {
	if fields.MaxNum(f.Name) == fields.NoNum {
		return f.Doc
	}
	what := f.Params[0].Name // field or kind, first but for cluster_node(i, kind, ...)
	for _, p := range f.Params {
		if p.Name == "field" || p.Name == "kind" {
			what = p.Name
			break
		}
	}
	return f.Doc + "; " + fields.FieldNumbers(f.Name, what)
}

// fieldTable is the table of everything a guest can read (fields.Fields).
func fieldTable() string {
	var b strings.Builder
	b.WriteString("| object | field | host function | wire form | host cost | declaration | Go SDK |\n|---|---|---|---|---|---|---|\n")
	for _, f := range fields.Fields {
		fn := code(f.Fn)
		if f.Num != fields.NoNum {
			fn = code(fmt.Sprintf("%s(%d)", f.Fn, f.Num))
		}
		wire := f.Wire.String()
		if len(f.Columns) > 0 {
			wire += " (" + strings.Join(f.Columns, ", ") + ")"
		}
		path := f.Path
		if f.Doc != "" {
			path += ": " + f.Doc
		}
		scope := ""
		if f.Scope != fields.ScopeNone {
			scope = code(string(f.Scope))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", f.Object, path, fn, wire, f.Cost, scope, code(f.Accessor))
	}
	return b.String()
}

// tableColumns is the table of node table columns (abi.TableColumns).
func tableColumns() string {
	var b strings.Builder
	b.WriteString("| column | slot (8 bytes) |\n|---|---|\n")
	for _, c := range abi.TableColumns {
		name := c.Kind
		if c.Arg != "" {
			name += ":<" + c.Arg + ">"
		}
		fmt.Fprintf(&b, "| `%s` | %s |\n", name, c.Slot)
	}
	return b.String()
}
