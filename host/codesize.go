package host

import (
	"reflect"

	"github.com/tetratelabs/wazero"
)

// compiledCodeBytes is the machine code wazero holds for a compiled module:
// the executable and the entry preambles of its compiled form, read from
// wazero v1.12.0's compiler engine (engine.compiledModules, keyed by the
// module's ID). It reads unexported fields, so it returns ok=false if a
// wazero upgrade moved them (TestCompiledCodeBytesReadsWazero fails then);
// the caller falls back to the growth of the process's executable
// mappings. Callers hold measureMu, under which every compilation and
// module close happens, so the map is not written meanwhile.
//
// Why not only the mappings: wazero unmaps the code of a closed module in a
// finalizer, after some later collection; a compilation that runs then can
// be mapped at the address just freed and look like no new code at all.
func compiledCodeBytes(cm wazero.CompiledModule) (n int64, ok bool) {
	defer func() {
		if recover() != nil {
			n, ok = 0, false
		}
	}()
	c := reflect.ValueOf(cm)
	if c.Kind() != reflect.Pointer || c.IsNil() {
		return 0, false
	}
	c = c.Elem()
	mod := c.FieldByName("module")
	eng := c.FieldByName("compiledEngine")
	if !mod.IsValid() || !eng.IsValid() || mod.IsNil() || eng.IsNil() {
		return 0, false
	}
	id := mod.Elem().FieldByName("ID")
	e := eng.Elem()
	if e.Kind() == reflect.Pointer {
		e = e.Elem()
	}
	mods := e.FieldByName("compiledModules")
	if !id.IsValid() || id.Kind() != reflect.Array || !mods.IsValid() || mods.Kind() != reflect.Map {
		return 0, false
	}
	it := mods.MapRange()
	for it.Next() {
		k := it.Key()
		if k.Kind() != reflect.Array || k.Len() != id.Len() {
			return 0, false
		}
		same := true
		for i := 0; i < k.Len() && same; i++ {
			same = k.Index(i).Uint() == id.Index(i).Uint()
		}
		if !same {
			continue
		}
		m := it.Value()
		for m.Kind() == reflect.Pointer {
			if m.IsNil() {
				return 0, false
			}
			m = m.Elem()
		}
		cmv := m.FieldByName("compiledModule")
		if !cmv.IsValid() || cmv.IsNil() {
			return 0, false
		}
		x := cmv.Elem().FieldByName("executables")
		if !x.IsValid() || x.IsNil() {
			return 0, false
		}
		x = x.Elem()
		exe, pre := x.FieldByName("executable"), x.FieldByName("entryPreambles")
		if !exe.IsValid() || !pre.IsValid() || exe.Kind() != reflect.Slice || pre.Kind() != reflect.Slice {
			return 0, false
		}
		return int64(exe.Len() + pre.Len()), exe.Len() > 0
	}
	return 0, false
}
