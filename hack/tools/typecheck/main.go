// Command typecheck type-checks packages of the main module as the go
// command would build them with a build line's module file and build tag,
// without compiling anything.
//
// make test cannot afford to compile every older build line's
// kube-scheduler (four to seven minutes each on 2 cores, cold; make
// test-lines does that and runs their e2e), but the commonest way to break a
// line is code that no longer compiles against its older scheduler
// framework. Type-checking finds that in a fraction of the time: the
// module's own packages are checked whole, function bodies included, and
// every dependency only by its declarations (bodies dropped while parsing),
// which is all our code can see of it.
//
//	go run ./typecheck -C ROOT -modfile go.k8s-1.35.mod -tags k8s_1_35 ./cmd/kube-scheduler
//
// It exits 1 and prints each error of the module's packages if any has one.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/tools/go/packages"
)

func main() {
	dir := flag.String("C", ".", "the main module's directory")
	modFile := flag.String("modfile", "", "the build line's module file (go.k8s-1.MINOR.mod), relative to -C")
	tags := flag.String("tags", "", "build tags, as the line builds with them")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: typecheck [-C dir] [-modfile file] [-tags tags] packages...")
		os.Exit(2)
	}
	start := time.Now()
	n, errs, err := check(*dir, *modFile, *tags, flag.Args())
	if err != nil {
		fmt.Fprintf(os.Stderr, "typecheck: %v\n", err)
		os.Exit(2)
	}
	for _, e := range errs {
		fmt.Fprintln(os.Stderr, e)
	}
	line := *modFile
	if line == "" {
		line = "go.mod"
	}
	if len(errs) > 0 {
		fmt.Fprintf(os.Stderr, "typecheck: %s: %d errors in the module's packages\n", line, len(errs))
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "typecheck: %s: %d packages, no errors (%.0f s)\n", line, n, time.Since(start).Seconds())
}

// check loads patterns and their dependencies from source and returns how
// many packages it checked and the errors of the module's own packages.
func check(dir, modFile, tags string, patterns []string) (int, []string, error) {
	var flags []string
	if modFile != "" {
		flags = append(flags, "-modfile="+modFile)
	}
	if tags != "" {
		flags = append(flags, "-tags="+tags)
	}
	// The module path decides which packages are checked whole.
	mf := modFile
	if mf == "" {
		mf = "go.mod"
	}
	data, err := os.ReadFile(filepath.Join(dir, mf))
	if err != nil {
		return 0, nil, err
	}
	own := modfile.ModulePath(data)
	if own == "" {
		return 0, nil, fmt.Errorf("%s has no module line", mf)
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return 0, nil, err
	}
	// ParseFile runs on many goroutines; it only reads root.
	ours := func(filename string) bool { return strings.HasPrefix(filename, root+string(filepath.Separator)) }
	cfg := &packages.Config{
		Dir:        dir,
		BuildFlags: flags,
		// The binaries are static (CGO_ENABLED=0 in the Makefile): the
		// same files are chosen as in the build.
		Env:  append(os.Environ(), "CGO_ENABLED=0"),
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedImports | packages.NeedDeps | packages.NeedTypes | packages.NeedSyntax | packages.NeedModule,
		ParseFile: func(fset *token.FileSet, filename string, src []byte) (*ast.File, error) {
			f, err := parser.ParseFile(fset, filename, src, parser.SkipObjectResolution)
			if f == nil || ours(filename) {
				return f, err
			}
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok {
					fd.Body = nil
				}
			}
			return f, err
		},
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return 0, nil, err
	}
	n := 0
	var errs []string
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		n++
		if p.PkgPath != own && !strings.HasPrefix(p.PkgPath, own+"/") {
			// Without bodies a dependency's imports may look unused;
			// its own build is not what this checks.
			return
		}
		for _, e := range p.Errors {
			errs = append(errs, e.Error())
		}
	})
	return n, errs, nil
}
