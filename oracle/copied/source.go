// Package copied checks, mechanically, every piece of kubelet code the
// oracle harness (package main one directory up) copied or modelled because
// the kubelet keeps it unexported: each release's k8s.io/kubernetes source
// in the module cache is parsed, the upstream function (or the statements
// the harness copied out of a larger one) is extracted, the adaptations the
// table declares are applied to it as AST rewrites, and the result is
// compared with the harness's copy for every release the copy is built for.
// table.go is the inventory; copied_test.go runs it.
//
// The package needs only the standard library: `go test ./copied` runs with
// or without the oracle's -modfile and build tags.
package copied

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// release is one Kubernetes release the oracle is built for.
type release struct {
	minor   string // "1.32"
	tag     string // the harness's build tag, "k8s_1_32"
	modfile string // versions/1.32/go.mod, relative to the oracle directory
	version string // the k8s.io/kubernetes version its go.mod requires
	dir     string // that module's source in the module cache
}

// releases reads versions/*/go.mod under oracleDir, in release order.
func releases(oracleDir, modcache string) ([]release, error) {
	mods, err := filepath.Glob(filepath.Join(oracleDir, "versions", "*", "go.mod"))
	if err != nil {
		return nil, err
	}
	var out []release
	for _, mod := range mods {
		minor := filepath.Base(filepath.Dir(mod))
		data, err := os.ReadFile(mod)
		if err != nil {
			return nil, err
		}
		version, err := kubernetesVersion(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", mod, err)
		}
		out = append(out, release{
			minor:   minor,
			tag:     "k8s_" + strings.ReplaceAll(minor, ".", "_"),
			modfile: filepath.Join("versions", minor, "go.mod"),
			version: version,
			dir:     filepath.Join(modcache, "k8s.io", "kubernetes@"+version),
		})
	}
	sort.Slice(out, func(i, j int) bool { return minorLess(out[i].minor, out[j].minor) })
	return out, nil
}

func minorLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x < y
		}
	}
	return len(pa) < len(pb)
}

var (
	requireLine = regexp.MustCompile(`^(?:require\s+)?k8s\.io/kubernetes\s+(v\S+)`)
	replaceLine = regexp.MustCompile(`^(?:replace\s+)?k8s\.io/kubernetes(?:\s+v\S+)?\s+=>\s+(\S+)(?:\s+(v\S+))?`)
)

// kubernetesVersion is the k8s.io/kubernetes version a go.mod builds with:
// its require line, or the version a replace directive substitutes.
func kubernetesVersion(gomod []byte) (string, error) {
	var required, replaced string
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "//"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if m := replaceLine.FindStringSubmatch(line); m != nil {
			if m[1] != "k8s.io/kubernetes" || m[2] == "" {
				return "", fmt.Errorf("k8s.io/kubernetes is replaced by %s, not a release", m[1])
			}
			replaced = m[2]
			continue
		}
		if m := requireLine.FindStringSubmatch(line); m != nil {
			required = m[1]
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	if replaced != "" {
		return replaced, nil
	}
	if required == "" {
		return "", fmt.Errorf("no k8s.io/kubernetes requirement")
	}
	return required, nil
}

// goModCache is `go env GOMODCACHE`. (go test puts its own go first on PATH.)
func goModCache() (string, error) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMODCACHE: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("go env GOMODCACHE is empty")
	}
	return dir, nil
}

// harnessFile is one of the harness's Go files with its build constraint.
type harnessFile struct {
	name  string
	path  string
	src   []byte
	build constraint.Expr // nil: built for every release
}

// parse parses the file afresh (with comments, for the doc comments the
// inventory reads; they are dropped before any comparison).
func (h *harnessFile) parse() (*ast.File, error) {
	return parser.ParseFile(token.NewFileSet(), h.path, h.src, parser.ParseComments|parser.SkipObjectResolution)
}

// builtFor reports whether the file is part of the given release's build.
func (h *harnessFile) builtFor(r release) bool {
	if h.build == nil {
		return true
	}
	return h.build.Eval(func(tag string) bool {
		if strings.HasPrefix(tag, "k8s_") {
			return tag == r.tag
		}
		// The oracle is built on Linux only; any other tag is off.
		return tag == "linux" || tag == "unix"
	})
}

// readHarness parses the harness's Go files (not its tests) in dir.
func readHarness(dir string) ([]*harnessFile, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var out []*harnessFile
	for _, path := range names {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		h := &harnessFile{name: filepath.Base(path), path: path, src: src}
		for _, group := range f.Comments {
			if group.Pos() > f.Package {
				break
			}
			for _, c := range group.List {
				if constraint.IsGoBuild(c.Text) {
					if h.build, err = constraint.Parse(c.Text); err != nil {
						return nil, fmt.Errorf("%s: %v", path, err)
					}
				}
			}
		}
		out = append(out, h)
	}
	return out, nil
}

// sources caches the files of each release's module; every request parses
// afresh, so that rewriting one check's copy never touches another's.
type sources struct {
	files map[string][]byte
}

func newSources() *sources { return &sources{files: map[string][]byte{}} }

func (s *sources) parse(r release, rel string) (*ast.File, error) {
	path := filepath.Join(r.dir, filepath.FromSlash(rel))
	src, ok := s.files[path]
	if !ok {
		var err error
		if src, err = os.ReadFile(path); err != nil {
			return nil, err
		}
		s.files[path] = src
	}
	return parser.ParseFile(token.NewFileSet(), path, src, parser.SkipObjectResolution)
}

// funcDecl finds the function or method name ("f", or "T.m" for a method
// of T or *T) among files.
func funcDecl(files []*ast.File, name string) []*ast.FuncDecl {
	recv, fn := "", name
	if i := strings.LastIndex(name, "."); i >= 0 {
		recv, fn = name[:i], name[i+1:]
	}
	var out []*ast.FuncDecl
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Name.Name != fn || receiverType(fd) != recv {
				continue
			}
			out = append(out, fd)
		}
	}
	return out
}

// receiverType is the name of a method's receiver type ("" for a function).
func receiverType(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	t := fd.Recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return "?"
}

// typeSpec finds the type declaration name among files.
func typeSpec(files []*ast.File, name string) []*ast.TypeSpec {
	var out []*ast.TypeSpec
	for _, f := range files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				if ts := spec.(*ast.TypeSpec); ts.Name.Name == name {
					out = append(out, ts)
				}
			}
		}
	}
	return out
}
