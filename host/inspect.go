package host

import (
	"context"
	"sort"

	"github.com/tetratelabs/wazero"
)

// Import is one function a module imports, and whether the sandbox lets a
// policy import it.
type Import struct {
	Module  string `json:"module"`
	Name    string `json:"name"`
	Allowed bool   `json:"allowed"`
}

// ModuleInfo is what a module declares, read without running it: for tools
// that check a module before it is uploaded.
type ModuleInfo struct {
	Imports []Import `json:"imports"`
	// Exports are the exported functions, sorted.
	Exports []string `json:"exports"`
	// ExportsMemory is true when the module exports its memory as "memory".
	ExportsMemory bool `json:"exportsMemory"`
}

// Inspect compiles wasm (raw, already decoded) with wazero's interpreter,
// which is fast and runs nothing, and lists its imports and exports.
func Inspect(ctx context.Context, wasm []byte) (*ModuleInfo, error) {
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	cm, err := compile(ctx, rt, wasm, CompileLimits{}.withDefaults())
	if err != nil {
		return nil, err
	}
	info := &ModuleInfo{}
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		info.Imports = append(info.Imports, Import{Module: mod, Name: name, Allowed: importProblem(f) == ""})
	}
	for _, m := range cm.ImportedMemories() {
		mod, name, _ := m.Import()
		info.Imports = append(info.Imports, Import{Module: mod, Name: name + " (memory)", Allowed: false})
	}
	sort.Slice(info.Imports, func(i, j int) bool {
		a, b := info.Imports[i], info.Imports[j]
		return a.Module < b.Module || (a.Module == b.Module && a.Name < b.Name)
	})
	for name := range cm.ExportedFunctions() {
		info.Exports = append(info.Exports, name)
	}
	sort.Strings(info.Exports)
	_, info.ExportsMemory = cm.ExportedMemories()["memory"]
	return info, nil
}

// SHA256Of returns the digest a policy's sha256 pin compares with: of the
// wasm bytes after any gunzip. It returns "" for bytes that are not a module.
func SHA256Of(src []byte) string {
	_, digest, err := DecodeModule(src)
	if err != nil {
		return ""
	}
	return digest
}
