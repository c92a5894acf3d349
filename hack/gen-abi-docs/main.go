// Command gen-abi-docs writes the tables of docs/abi.md that are derived
// from the ABI's own tables (guest-sdk/abi: Points and HostFunctions), each
// between "<!-- BEGIN GENERATED name -->" and "<!-- END GENERATED name -->"
// markers. `make generate` runs it; with -check it only reports whether the
// file is current, which the verify gate and this package's test use.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
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
	blocks := map[string]string{"abi-points": points(), "abi-capabilities": capabilities()}
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

func capabilities() string {
	var parts []string
	for p := abi.Point(0); p < abi.NumPoints; p++ {
		parts = append(parts, fmt.Sprintf("%s %d", abi.Points[p].Export, p.Cap()))
	}
	return "**Capabilities bits:** " + strings.Join(parts, ", ") + ".\n"
}

func functions(s abi.Section) string {
	var b strings.Builder
	b.WriteString("| function | signature | |\n|---|---|---|\n")
	for _, f := range abi.HostFunctions {
		if f.Section == s {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", code(f.Name), code(abi.Signature(f.Params, f.Results)), f.Doc)
		}
	}
	return b.String()
}
