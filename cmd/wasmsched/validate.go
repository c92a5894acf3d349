package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host"
)

// configMapLimit is the most a ConfigMap may hold (the apiserver's limit on
// its data), less a margin for the object's metadata.
const configMapLimit = 1<<20 - 8<<10

// Check is one validation step's outcome.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// ValidateReport is the result of wasmsched validate.
type ValidateReport struct {
	File       string        `json:"file"`
	SHA256     string        `json:"sha256,omitempty"`
	Size       int           `json:"size"`
	GzipSize   int           `json:"gzipSize,omitempty"`
	ABIVersion int           `json:"abiVersion,omitempty"`
	Exports    []string      `json:"exports,omitempty"`
	Imports    []host.Import `json:"imports,omitempty"`
	LoadTime   time.Duration `json:"loadTime,omitempty"`
	Checks     []Check       `json:"checks"`
	Valid      bool          `json:"valid"`
}

func newValidateCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "validate POLICY.wasm",
		Short: "Check a policy module: ABI version, exports, imports, size, and a dry compile and instantiate",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := validateFile(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if err := print(cmd.OutOrStdout(), g.output, r, r.table); err != nil {
				return err
			}
			if !r.Valid {
				return fmt.Errorf("%s is not a valid policy module", args[0])
			}
			return nil
		},
	}
}

func validateFile(ctx context.Context, path string) (*ValidateReport, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &ValidateReport{File: path, Size: len(src), Valid: true}
	add := func(name string, ok bool, detail string) {
		r.Checks = append(r.Checks, Check{name, ok, detail})
		r.Valid = r.Valid && ok
	}
	wasm, digest, err := host.DecodeModule(src)
	if err != nil {
		add("module", false, err.Error())
		return r, nil
	}
	r.SHA256, r.Size = digest, len(wasm)
	add("module", true, fmt.Sprintf("wasm, %d bytes, sha256 %s", len(wasm), digest))

	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	_, _ = zw.Write(wasm)
	_ = zw.Close()
	r.GzipSize = gz.Len()
	switch {
	case len(wasm) <= configMapLimit:
		add("size", true, fmt.Sprintf("fits a ConfigMap as is (%d KiB; gzipped %d KiB)", len(wasm)>>10, gz.Len()>>10))
	case gz.Len() <= configMapLimit:
		add("size", true, fmt.Sprintf("fits a ConfigMap gzipped (%d KiB → %d KiB); wasmsched push gzips it", len(wasm)>>10, gz.Len()>>10))
	default:
		add("size", false, fmt.Sprintf("%d KiB gzipped is over the ConfigMap limit of 1 MiB: use a file source, or build with TinyGo (-opt=z, -no-debug)", gz.Len()>>10))
	}

	info, err := host.Inspect(ctx, wasm)
	if err != nil {
		add("compile", false, err.Error())
		return r, nil
	}
	r.Imports = info.Imports
	var denied []string
	for _, im := range info.Imports {
		if !im.Allowed {
			denied = append(denied, im.Module+"."+im.Name)
		}
	}
	if len(denied) > 0 {
		add("imports", false, "outside the sandbox allow-list: "+strings.Join(denied, ", ")+" (no filesystem, sockets or environment; see docs/security.md)")
	} else {
		add("imports", true, fmt.Sprintf("%d imports, all allowed", len(info.Imports)))
	}
	// The ABI's exports: every extension point of abi.Points, and the
	// version and initializers.
	for _, e := range info.Exports {
		abiExport := e == abi.ExportAbiVersion || e == abi.ExportInitialize || e == abi.ExportStart
		for _, pt := range abi.Points {
			abiExport = abiExport || e == pt.Export
		}
		if abiExport {
			r.Exports = append(r.Exports, e)
		}
	}

	// The dry run is the scheduler's own load path: compile, validate
	// exports, instantiate and initialize, ABI version, capabilities.
	engine, err := host.NewEngine(host.EngineOptions{})
	if err != nil {
		return nil, err
	}
	defer engine.Close()
	p, err := engine.NewPolicy(ctx, host.PolicySpec{Name: "validate", Timeout: 100 * time.Millisecond, MaxInstances: 1})
	if err != nil {
		return nil, err
	}
	defer p.Close(ctx)
	start := time.Now()
	v, err := p.Load(ctx, wasm, "")
	var le *host.LoadError
	switch {
	case err == nil:
		r.LoadTime = time.Since(start)
		r.ABIVersion = v.ABIVersion()
		add("abi", true, fmt.Sprintf("ABI v%d; entry points %s", r.ABIVersion, v.Exports().String()))
		add("instantiate", true, fmt.Sprintf("compiled and initialized in %s", r.LoadTime.Round(time.Millisecond)))
	case errors.As(err, &le) && le.Reason == "ABIVersion":
		add("abi", false, le.Err.Error())
	case errors.As(err, &le) && (le.Reason == "Validate" || le.Reason == "Compile"):
		if len(denied) == 0 {
			add("abi", false, le.Err.Error())
		}
	default:
		add("instantiate", false, strings.TrimPrefix(err.Error(), `policy "validate": `))
	}
	return r, nil
}

func (r *ValidateReport) table(tw *tabwriter.Writer) {
	row(tw, "CHECK", "RESULT", "DETAIL")
	for _, c := range r.Checks {
		res := "ok"
		if !c.OK {
			res = "FAIL"
		}
		row(tw, c.Name, res, c.Detail)
	}
}
