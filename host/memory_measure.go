package host

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"
)

// liveHeap is the Go heap in use after a collection: the host heap that
// wazero's compiled modules and instances hold is measured as its change.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// heapNow is the live heap less the module sources that loads in progress
// hold: a measurement is the change of heapNow across the compilation or
// instantiation, so a source read by another policy meanwhile (megabytes
// for a Go guest) is not charged to the module measured.
func (pr *Process) heapNow() int64 {
	h := liveHeap()
	pr.sources.Lock()
	defer pr.sources.Unlock()
	return h - pr.sources.bytes
}

// holdSource counts b as held by a load until the returned func is called.
func (pr *Process) holdSource(b []byte) (release func()) {
	if len(b) == 0 {
		return func() {}
	}
	k := &b[0]
	pr.sources.Lock()
	if pr.sources.held == nil {
		pr.sources.held = map[*byte]int{}
	}
	if pr.sources.held[k]++; pr.sources.held[k] == 1 {
		pr.sources.bytes += int64(cap(b))
	}
	pr.sources.Unlock()
	return func() {
		pr.sources.Lock()
		if pr.sources.held[k]--; pr.sources.held[k] == 0 {
			delete(pr.sources.held, k)
			pr.sources.bytes -= int64(cap(b))
		}
		pr.sources.Unlock()
	}
}

// heapBaseline is heapNow at the start of a measurement, after the
// finalizers that the collection queued have run and what they released has
// been collected too. Otherwise they run during the measurement (wazero
// frees a closed module's code and data in finalizers) and the heap it
// measures shrinks by what they free: a Go module's heap measured 0 bytes
// under -race in a process full of closed engines.
func (pr *Process) heapBaseline() int64 {
	for range 2 {
		done := make(chan struct{})
		runtime.SetFinalizer(new([32]byte), func(*[32]byte) { close(done) })
		runtime.GC()
		select {
		case <-done:
		case <-time.After(100 * time.Millisecond):
		}
	}
	return pr.heapNow()
}

// mappings are address ranges [lo, hi), sorted.
type mappings [][2]uint64

// codeMappings lists the process's anonymous executable mappings: the
// machine code wazero compiled (the Go program's own code is mapped from
// its file). Empty where /proc is not available.
func codeMappings() mappings {
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil
	}
	var out mappings
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		// address perms offset dev inode [path]
		f := bytes.Fields(s.Bytes())
		if len(f) != 5 || len(f[1]) < 3 || f[1][2] != 'x' {
			continue
		}
		lo, hi, ok := bytes.Cut(f[0], []byte{'-'})
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(string(lo), 16, 64)
		z, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 == nil && err2 == nil && z > a {
			out = append(out, [2]uint64{a, z})
		}
	}
	return out
}

// newBytes is how many bytes of m were not mapped in before: the code a
// compilation added, whatever other code was unmapped meanwhile (another
// engine's modules freed by wazero's finalizers after a collection) and
// however the kernel merged adjacent mappings.
func (m mappings) newBytes(before mappings) int64 {
	var n int64
	j := 0
	for _, r := range m {
		lo := r[0]
		for j < len(before) && before[j][1] <= lo {
			j++
		}
		for k := j; k < len(before) && before[k][0] < r[1] && lo < r[1]; k++ {
			if before[k][0] > lo {
				n += int64(before[k][0] - lo)
			}
			lo = max(lo, before[k][1])
		}
		if lo < r[1] {
			n += int64(r[1] - lo)
		}
	}
	return n
}

// measurement is what a module's host heap was measured at (bytes). The
// machine code is measured on every compile: that costs no collection.
type measurement struct {
	ModuleHeap   int64 `json:"moduleHeap"`
	InstanceHeap int64 `json:"instanceHeap"`
}

// measurementsDir is where measurements are kept in a compilation cache
// dir, per wazero version and architecture (what the heap depends on).
func measurementsDir(cacheDir string) string {
	v := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/tetratelabs/wazero" {
				v = d.Version
				if d.Replace != nil {
					v = d.Replace.Version
				}
			}
		}
	}
	return filepath.Join(cacheDir, "wasmsched-memory", v+"-"+runtime.GOARCH)
}

func (e *Engine) measurementPath(k moduleKey) string {
	return filepath.Join(e.measurements, k.digest+"-"+strconv.FormatUint(uint64(k.pages), 10)+".json")
}

// loadMeasurement returns a module's stored measurement, if any.
func (e *Engine) loadMeasurement(k moduleKey) (measurement, bool) {
	var m measurement
	if e.measurements == "" {
		return m, false
	}
	b, err := os.ReadFile(e.measurementPath(k))
	if err != nil || json.Unmarshal(b, &m) != nil || m.ModuleHeap < 0 || m.InstanceHeap < 0 {
		return measurement{}, false
	}
	return m, true
}

// storeMeasurement keeps a module's measurement for the next start. A
// failure only costs the next start a measurement.
func (e *Engine) storeMeasurement(m *sharedModule) {
	if e.measurements == "" {
		return
	}
	b, _ := json.Marshal(measurement{ModuleHeap: m.heap, InstanceHeap: m.instHeap.Load()})
	if err := os.MkdirAll(e.measurements, 0o700); err != nil {
		return
	}
	path := e.measurementPath(m.key)
	tmp := path + ".tmp" + strconv.FormatInt(monotonic(), 10)
	if os.WriteFile(tmp, b, 0o600) != nil || os.Rename(tmp, path) != nil {
		_ = os.Remove(tmp)
	}
}
