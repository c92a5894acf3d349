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
	File string `json:"file,omitempty"`
	// Ref and Digest are the artifact validated from a registry.
	Ref        string        `json:"ref,omitempty"`
	Digest     string        `json:"digest,omitempty"`
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
	ro := &registryOptions{}
	cmd := &cobra.Command{
		Use:   "validate POLICY.wasm | oci://REGISTRY/REPOSITORY[:TAG][@DIGEST]",
		Short: "Check a policy module: ABI version, exports, imports, size, and a dry compile and instantiate; from a registry, pull it and verify its signature first",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r *ValidateReport
			var err error
			if strings.HasPrefix(args[0], "oci://") {
				r, err = validateOCI(cmd.Context(), args[0], ro)
			} else {
				r, err = validateFile(cmd.Context(), args[0])
			}
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
	ro.flags(cmd, false)
	cmd.Flags().StringVar(&ro.publicKey, "public-key", "", "with oci://: a PEM public key (cosign.pub) the artifact's signature must verify with")
	return cmd
}

func validateFile(ctx context.Context, path string) (*ValidateReport, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return validateModule(ctx, &ValidateReport{File: path, Size: len(src), Valid: true}, src, configMapSize)
}

// sizeCheck says whether a module of wasm bytes (gz gzipped) fits where it
// is going.
type sizeCheck func(wasm, gz int) (bool, string)

func configMapSize(wasm, gz int) (bool, string) {
	switch {
	case wasm <= configMapLimit:
		return true, fmt.Sprintf("fits a ConfigMap as is (%d KiB; gzipped %d KiB)", wasm>>10, gz>>10)
	case gz <= configMapLimit:
		return true, fmt.Sprintf("fits a ConfigMap gzipped (%d KiB → %d KiB); wasmsched push gzips it", wasm>>10, gz>>10)
	}
	return false, fmt.Sprintf("%d KiB gzipped is over the ConfigMap limit of 1 MiB: push it to a registry (wasmsched push POLICY.wasm oci://…), use a file source, or build with TinyGo (-opt=z, -no-debug)", gz>>10)
}

// validateModule adds the module's checks to r.
func validateModule(ctx context.Context, r *ValidateReport, src []byte, size sizeCheck) (*ValidateReport, error) {
	if ctx == nil {
		ctx = context.Background()
	}
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
	ok, detail := size(len(wasm), gz.Len())
	add("size", ok, detail)

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
