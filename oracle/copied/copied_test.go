package copied

// go test ./copied (from oracle/): every entry of table.go against every
// release under ../versions, read from the module cache.
//
//	go test ./copied -update   rewrites testdata/pinned/ from the module cache,
//	                           once the harness's models have been reviewed.

import (
	"flag"
	"go/ast"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/pinned/*.txt from the module cache (review the harness's models first)")

// oracleDir is the harness's directory.
const oracleDir = ".."

func setup(t *testing.T) (*env, []release) {
	t.Helper()
	modcache, err := goModCache()
	if err != nil {
		t.Fatal(err)
	}
	rs, err := releases(oracleDir, modcache)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) == 0 {
		t.Fatalf("no releases under %s", filepath.Join(oracleDir, "versions"))
	}
	var missing []string
	for _, r := range rs {
		if _, err := os.Stat(filepath.Join(r.dir, "cmd", "kubelet", "app", "server.go")); err != nil {
			missing = append(missing, "release "+r.minor+": k8s.io/kubernetes "+r.version+" is not in the module cache ("+modcache+
				"): run `cd oracle && go mod download -modfile "+filepath.ToSlash(r.modfile)+"`")
		}
	}
	if len(missing) > 0 {
		t.Fatal(strings.Join(missing, "\n"))
	}
	harness, err := readHarness(oracleDir)
	if err != nil {
		t.Fatal(err)
	}
	return &env{upstream: newSources(), harness: harness, used: map[string]int{}}, rs
}

// Every copy prints, adapted as declared, exactly as the release's kubelet
// code; every model's upstream text is the one it was checked against.
func TestCopiedKubeletCode(t *testing.T) {
	e, rs := setup(t)
	names := map[string]bool{}
	ran := 0
	for i := range checks {
		c := &checks[i]
		if names[c.Name] {
			t.Fatalf("two checks named %q", c.Name)
		}
		names[c.Name] = true
		t.Run(c.Name, func(t *testing.T) {
			ran++
			if c.Kind == pinned {
				checkPinned(t, e, rs, c)
				return
			}
			for _, r := range rs {
				ok, err := c.applies(r)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					continue
				}
				if err := e.run(r, c); err != nil {
					t.Errorf("release %s (k8s.io/kubernetes %s): %s: %v", r.minor, r.version, c.Name, err)
				}
			}
		})
	}
	// (Only when every check ran: -run may pick some.)
	if !t.Failed() && ran == len(checks) {
		for _, msg := range e.unusedAdaptations(checks) {
			t.Error(msg)
		}
	}
}

func checkPinned(t *testing.T, e *env, rs []release, c *check) {
	got, err := e.pinnedText(rs, c)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "pinned", c.Name+".txt")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (create it with go test ./copied -update, after checking the harness's %s against the kubelet code)", err, c.Harness)
	}
	if string(want) != got {
		t.Errorf("%s: the upstream code the harness's %s models changed (- %s, + the module cache now); "+
			"review %s against it, then go test ./copied -update:\n%s", c.Name, c.Harness, path, c.Harness, diff(string(want), got))
	}
}

// mentionsKubelet matches doc comments that say a declaration is, or
// copies, kubelet code.
var mentionsKubelet = regexp.MustCompile(`\bis (the end of |the tail of )?[A-Z][a-z]+[A-Z][A-Za-z]*\b|(?i)\bcopied\b|\bverbatim\b|\bis (cmd|pkg)/|\bis the kubelet's\b|\bis the (tail|end) of\b|\bis what \w+ does\b|\bis the pod manager's\b|\bis the [A-Za-z]+ of cmd/kubelet\b`)

// Every harness declaration whose comment says it is kubelet code is in the
// table (or in notCopied, with the reason), and every copy is checked for
// every release it is built for.
func TestEveryCopyIsChecked(t *testing.T) {
	e, rs := setup(t)
	checked := map[string]bool{}
	for _, c := range checks {
		if c.Harness != "" {
			checked[c.Harness] = true
		}
	}
	var unlisted []string
	declared := map[string]bool{}
	for _, h := range e.harness {
		f, err := h.parse()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			name, doc := declName(d)
			declared[name] = true
			if name == "" || doc == nil || !mentionsKubelet.MatchString(doc.Text()) {
				continue
			}
			if !checked[name] && notCopied[name] == "" {
				unlisted = append(unlisted, h.name+": "+name)
			}
		}
	}
	sort.Strings(unlisted)
	for _, u := range unlisted {
		t.Errorf("%s: its comment says it is kubelet code, but copied/table.go has no check for it (or a notCopied reason)", u)
	}
	for name := range notCopied {
		if checked[name] {
			t.Errorf("%s is both checked and in notCopied", name)
		}
		if !declared[name] {
			t.Errorf("notCopied names %s, which the harness does not declare", name)
		}
	}
	for name := range checked {
		if !declared[name] {
			t.Errorf("copied/table.go checks %s, which the harness does not declare", name)
		}
	}

	// Each compared copy, in every release whose build has it.
	for _, c := range checks {
		if c.Kind != verbatim && c.Kind != fragment && c.Kind != fields {
			continue
		}
		for _, r := range rs {
			if _, _, err := e.harnessDecl(r, c.Harness); err != nil {
				continue // not built for r
			}
			covered := false
			for _, other := range checks {
				if other.Harness != c.Harness {
					continue
				}
				if ok, err := other.applies(r); err == nil && ok {
					covered = true
				}
			}
			if !covered {
				t.Errorf("%s is built for release %s, which no check of it covers", c.Harness, r.minor)
			}
		}
	}
}

// declName is a function's ("f", "T.m") or a single type's name and doc.
func declName(d ast.Decl) (string, *ast.CommentGroup) {
	switch d := d.(type) {
	case *ast.FuncDecl:
		if recv := receiverType(d); recv != "" {
			return recv + "." + d.Name.Name, d.Doc
		}
		return d.Name.Name, d.Doc
	case *ast.GenDecl:
		if len(d.Specs) != 1 {
			return "", nil
		}
		switch s := d.Specs[0].(type) {
		case *ast.TypeSpec:
			return s.Name.Name, d.Doc
		case *ast.ValueSpec:
			if len(s.Names) == 1 {
				return s.Names[0].Name, d.Doc
			}
		}
	}
	return "", nil
}

func TestKubernetesVersion(t *testing.T) {
	for _, tc := range []struct{ gomod, want string }{
		{"module m\n\nrequire (\n\tk8s.io/api v0.32.10\n\tk8s.io/kubernetes v1.32.10\n)\n", "v1.32.10"},
		{"module m\nrequire k8s.io/kubernetes v1.37.2 // indirect\n", "v1.37.2"},
		{"module m\nrequire k8s.io/kubernetes v1.36.0\nreplace k8s.io/kubernetes => k8s.io/kubernetes v1.36.3\n", "v1.36.3"},
		{"module m\nrequire k8s.io/kubernetes v1.36.0\nreplace (\n\tk8s.io/kubernetes v1.36.0 => k8s.io/kubernetes v1.36.2\n)\n", "v1.36.2"},
	} {
		got, err := kubernetesVersion([]byte(tc.gomod))
		if err != nil || got != tc.want {
			t.Errorf("%q: got %q, %v; want %q", tc.gomod, got, err, tc.want)
		}
	}
	for _, bad := range []string{"module m\n", "module m\nrequire k8s.io/kubernetes v1.32.0\nreplace k8s.io/kubernetes => ../kubernetes\n"} {
		if got, err := kubernetesVersion([]byte(bad)); err == nil {
			t.Errorf("%q: got %q, want an error", bad, got)
		}
	}
}

// The comparison is blind to layout and comments, and to nothing else.
func TestNormalForm(t *testing.T) {
	parse := func(src string) string {
		stmts, err := parseStmts(src)
		if err != nil {
			t.Fatal(err)
		}
		return render(stmts)
	}
	a := parse("x := f(a,\n\tb) // why\n\n// note\nif x > 0 { return }")
	b := parse("x := f(a, b)\nif x > 0 {\n\treturn\n}")
	if a != b {
		t.Errorf("layout counted:\n%s\n%s", a, b)
	}
	if c := parse("x := f(b, a)\nif x > 0 {\n\treturn\n}"); c == a {
		t.Error("argument order not counted")
	}
	// Adaptations: an expression rewrite does not touch field names.
	stmts, _ := parseStmts("v := s.s + s")
	n := &ast.BlockStmt{List: stmts}
	if count, err := Replace("s", "kc").apply(n); err != nil || count != 2 || render(n.List) != parse("v := kc.s + kc") {
		t.Errorf("Replace: %d %v %s", count, err, render(n.List))
	}
}
