package copied

import (
	"fmt"
	"go/ast"
	"go/build/constraint"
	"sort"
	"strings"
)

// kind is how a check compares.
type kind int

const (
	// verbatim: the upstream declaration (a function, or a method turned into
	// a function), adapted, prints exactly as the harness's copy.
	verbatim kind = iota
	// fragment: statements cut out of a larger upstream function (From,
	// Count), adapted, print exactly as the harness function's body.
	fragment
	// order: the calls the harness makes, in its order, are the upstream
	// calls they stand for, in the kubelet's order (Pairs); without a
	// harness function, the upstream calls must come in the order Pairs lists.
	order
	// pinned: the harness models the upstream code rather than copying it (it
	// cannot be copied: it is spread over a struct, or needs callbacks the
	// harness supplies differently). The upstream text, per release, is kept
	// in testdata/pinned/<Name>.txt, the text the model was last checked
	// against: an upstream change fails until the harness is reviewed and the
	// file regenerated (go test ./copied -update).
	pinned
	// contains: the upstream declaration (or the whole file when Decl is "")
	// contains every Has text and no HasNot text, printed normalised.
	contains
	// fields: every field of the harness's struct type is a field of the
	// upstream struct type, with the same type.
	fields
)

func (k kind) String() string {
	return [...]string{"verbatim", "fragment", "order", "pinned", "contains", "fields"}[k]
}

// loc is a declaration in the release's k8s.io/kubernetes module.
type loc struct {
	File string // path in the module, e.g. "cmd/kubelet/app/server.go"
	Decl string // "f", or "T.m" for a method of T or *T; a type for fields
}

// pair maps one harness call to the upstream call it stands for. Upstream
// may list alternatives separated by " | " (a call renamed between releases).
type pair struct{ Harness, Upstream string }

// check is one inventory entry.
type check struct {
	// Name is the harness declaration the check covers ("f", "T.m", or a
	// type), or a name of its own for order and pinned checks.
	Name string
	// What says what was copied or modelled, and why.
	What string
	Kind kind
	// Releases is a build constraint over the release tags (k8s_1_32, ...)
	// naming the releases the check applies to; "" is every release.
	Releases string

	// Upstream is where the kubelet has it (for order: every function
	// searched, in the kubelet's order; for pinned: every declaration kept).
	Upstream []loc
	// From, Count and To cut a fragment out of the upstream declaration
	// (fragment; pinned and order take it too): Count statements from the
	// first one whose printed form starts with From, or (Count 0) from there
	// up to the first one starting with To.
	From, To string
	Count    int
	// Adapt are the declared adaptations of the upstream side.
	Adapt []rewrite
	// Harness is the harness's declaration the upstream one is compared with
	// (verbatim, fragment, order, fields); "" for upstream-only checks.
	Harness string
	// HarnessFrom and HarnessCount compare (fragment) only that part of the
	// harness function's body, cut as From and Count cut the upstream one.
	HarnessFrom  string
	HarnessCount int
	// Own are adaptations of the harness side (a fragment copied into a
	// function of its own: its final return, its extra result).
	Own []rewrite
	// Pairs are the calls an order check compares.
	Pairs []pair
	// KubeletOnly: an order check of the kubelet's side only, against the
	// order Pairs lists (the harness writes that order as a list, not calls).
	KubeletOnly bool
	// Has and HasNot are the texts a contains check looks for.
	Has, HasNot []string
}

// applies reports whether the check covers release r.
func (c *check) applies(r release) (bool, error) {
	if c.Releases == "" {
		return true, nil
	}
	expr, err := constraint.Parse("//go:build " + c.Releases)
	if err != nil {
		return false, fmt.Errorf("%s: Releases %q: %v", c.Name, c.Releases, err)
	}
	return expr.Eval(func(tag string) bool { return tag == r.tag }), nil
}

// env is what a check runs against.
type env struct {
	upstream *sources
	harness  []*harnessFile
	used     map[string]int // adaptation -> matches, over all releases
}

// harnessDecl is the release's copy of a harness function or type: the one
// declaration of that name among the files built for r.
func (e *env) harnessDecl(r release, name string) (ast.Node, string, error) {
	var found []ast.Node
	var where []string
	for _, h := range e.harness {
		if !h.builtFor(r) {
			continue
		}
		f, err := h.parse()
		if err != nil {
			return nil, "", err
		}
		for _, fd := range funcDecl([]*ast.File{f}, name) {
			found, where = append(found, fd), append(where, h.name)
		}
		for _, ts := range typeSpec([]*ast.File{f}, name) {
			found, where = append(found, ts), append(where, h.name)
		}
	}
	if len(found) != 1 {
		return nil, "", fmt.Errorf("harness: %d declarations of %s built for %s (%s)", len(found), name, r.minor, strings.Join(where, ", "))
	}
	strip(found[0])
	return found[0], where[0], nil
}

// upstreamDecl is a declaration of the release's module, stripped.
func (e *env) upstreamDecl(r release, l loc) (ast.Node, error) {
	f, err := e.upstream.parse(r, l.File)
	if err != nil {
		return nil, fmt.Errorf("k8s.io/kubernetes@%s: %v", r.version, err)
	}
	if l.Decl == "" {
		strip(f)
		return f, nil
	}
	var found []ast.Node
	for _, fd := range funcDecl([]*ast.File{f}, l.Decl) {
		found = append(found, fd)
	}
	for _, ts := range typeSpec([]*ast.File{f}, l.Decl) {
		found = append(found, ts)
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("k8s.io/kubernetes@%s %s: %d declarations of %s", r.version, l.File, len(found), l.Decl)
	}
	strip(found[0])
	return found[0], nil
}

// adapt applies rewrites to n, counting their matches under key.
func (e *env) adapt(n ast.Node, rewrites []rewrite, side string, c *check) error {
	for _, rw := range rewrites {
		count, err := rw.apply(n)
		if err != nil {
			return fmt.Errorf("%s adaptation %v: %v", side, rw, err)
		}
		e.used[c.Name+"\x00"+side+"\x00"+rw.String()] += count
	}
	return nil
}

// upstreamText is the check's upstream side for r, adapted and printed:
// each declaration of Upstream, cut to the fragment when From is set.
func (e *env) upstreamText(r release, c *check) (string, error) {
	var parts []string
	for _, l := range c.Upstream {
		n, err := e.upstreamDecl(r, l)
		if err != nil {
			return "", err
		}
		if c.From != "" {
			stmts, err := cutFragment(n, c.From, c.To, c.Count)
			if err != nil {
				return "", fmt.Errorf("%s %s: %v", l.File, l.Decl, err)
			}
			n = &ast.BlockStmt{List: stmts}
		}
		if err := e.adapt(n, c.Adapt, "upstream", c); err != nil {
			return "", err
		}
		if fd, ok := n.(*ast.FuncDecl); ok && c.Kind == verbatim {
			// The harness's name for it (an exported method becomes an
			// unexported function, a version suffix goes).
			fd.Name.Name = c.Harness[strings.LastIndex(c.Harness, ".")+1:]
		}
		parts = append(parts, render(n))
	}
	return strings.Join(parts, "\n\n"), nil
}

// run checks release r; the error says what differs.
func (e *env) run(r release, c *check) error {
	switch c.Kind {
	case verbatim, fragment:
		want, err := e.upstreamText(r, c)
		if err != nil {
			return err
		}
		n, file, err := e.harnessDecl(r, c.Harness)
		if err != nil {
			return err
		}
		if c.Kind == fragment {
			fd, ok := n.(*ast.FuncDecl)
			if !ok {
				return fmt.Errorf("harness %s is not a function", c.Harness)
			}
			n = fd.Body
			if c.HarnessFrom != "" {
				stmts, err := cutFragment(n, c.HarnessFrom, "", c.HarnessCount)
				if err != nil {
					return fmt.Errorf("harness %s (%s): %v", c.Harness, file, err)
				}
				n = &ast.BlockStmt{List: stmts}
			}
		}
		if err := e.adapt(n, c.Own, "harness", c); err != nil {
			return err
		}
		if got := render(n); got != want {
			return fmt.Errorf("%s (%s) differs from k8s.io/kubernetes@%s %s (- upstream, adapted; + harness):\n%s",
				c.Harness, file, r.version, locs(c.Upstream), diff(want, got))
		}
	case order:
		return e.order(r, c)
	case pinned:
		return nil // compared over all releases at once (pinnedText)
	case contains:
		for _, l := range c.Upstream {
			n, err := e.upstreamDecl(r, l)
			if err != nil {
				return err
			}
			text := render(n)
			for _, s := range c.Has {
				if !strings.Contains(text, s) {
					return fmt.Errorf("k8s.io/kubernetes@%s %s %s no longer contains %q (the harness's %s relies on it)", r.version, l.File, l.Decl, s, c.Harness)
				}
			}
			for _, s := range c.HasNot {
				if strings.Contains(text, s) {
					return fmt.Errorf("k8s.io/kubernetes@%s %s %s contains %q (the harness's %s assumes it does not)", r.version, l.File, l.Decl, s, c.Harness)
				}
			}
		}
	case fields:
		n, file, err := e.harnessDecl(r, c.Harness)
		if err != nil {
			return err
		}
		up, err := e.upstreamDecl(r, c.Upstream[0])
		if err != nil {
			return err
		}
		have := map[string]string{}
		for _, f := range structFields(up) {
			have[f[0]] = f[1]
		}
		for _, f := range structFields(n) {
			if t, ok := have[f[0]]; !ok || t != f[1] {
				return fmt.Errorf("%s (%s) field %s %s: k8s.io/kubernetes@%s %s %s has %q", c.Harness, file, f[0], f[1], r.version, c.Upstream[0].File, c.Upstream[0].Decl, t)
			}
		}
	}
	return nil
}

// structFields lists a struct type's fields as (name, printed type).
func structFields(n ast.Node) [][2]string {
	ts, ok := n.(*ast.TypeSpec)
	if !ok {
		return nil
	}
	st, ok := ts.Type.(*ast.StructType)
	if !ok {
		return nil
	}
	var out [][2]string
	for _, f := range st.Fields.List {
		for _, name := range f.Names {
			out = append(out, [2]string{name.Name, render(f.Type)})
		}
	}
	return out
}

func (e *env) order(r release, c *check) error {
	upstream := map[string]string{} // upstream callee -> harness name
	harness := map[string]bool{}
	var expect []string
	for _, p := range c.Pairs {
		for _, alt := range strings.Split(p.Upstream, " | ") {
			upstream[alt] = p.Harness
		}
		harness[p.Harness] = true
		expect = append(expect, p.Harness)
	}
	var kubelet []string
	for _, l := range c.Upstream {
		n, err := e.upstreamDecl(r, l)
		if err != nil {
			return err
		}
		if c.From != "" {
			stmts, err := cutFragment(n, c.From, c.To, c.Count)
			if err != nil {
				return fmt.Errorf("%s %s: %v", l.File, l.Decl, err)
			}
			n = &ast.BlockStmt{List: stmts}
		}
		for _, callee := range calls(n) {
			if name, ok := upstream[callee]; ok {
				kubelet = append(kubelet, name)
			}
		}
	}
	if c.KubeletOnly {
		if strings.Join(kubelet, " ") != strings.Join(expect, " ") {
			return fmt.Errorf("k8s.io/kubernetes@%s %s calls, in order:\n  %s\nthe harness assumes:\n  %s",
				r.version, locs(c.Upstream), strings.Join(kubelet, "\n  "), strings.Join(expect, "\n  "))
		}
		return nil
	}
	n, file, err := e.harnessDecl(r, c.Harness)
	if err != nil {
		return err
	}
	var own []string
	for _, callee := range calls(n) {
		if harness[callee] {
			own = append(own, callee)
		}
	}
	if strings.Join(kubelet, " ") != strings.Join(own, " ") {
		return fmt.Errorf("%s (%s) calls in another order than k8s.io/kubernetes@%s %s (- kubelet, + harness):\n%s",
			c.Harness, file, r.version, locs(c.Upstream), diff(strings.Join(kubelet, "\n"), strings.Join(own, "\n")))
	}
	return nil
}

// pinnedText is a pinned check's upstream text over every release it
// applies to: each distinct text once, headed by the releases that have it.
func (e *env) pinnedText(rs []release, c *check) (string, error) {
	var order []string
	byText := map[string][]string{}
	for _, r := range rs {
		ok, err := c.applies(r)
		if err != nil {
			return "", err
		}
		if !ok {
			continue
		}
		text, err := e.upstreamText(r, c)
		if err != nil {
			return "", fmt.Errorf("%s: %v", r.minor, err)
		}
		if _, seen := byText[text]; !seen {
			order = append(order, text)
		}
		byText[text] = append(byText[text], r.minor)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "// %s: the upstream text the harness's model was checked against.\n", c.Name)
	fmt.Fprintf(&b, "// %s\n", locs(c.Upstream))
	for _, text := range order {
		fmt.Fprintf(&b, "\n// releases: %s\n%s\n", strings.Join(byText[text], ", "), strings.TrimRight(text, "\n"))
	}
	return b.String(), nil
}

func locs(ls []loc) string {
	var out []string
	for _, l := range ls {
		if l.Decl == "" {
			out = append(out, l.File)
		} else {
			out = append(out, l.File+" "+l.Decl)
		}
	}
	return strings.Join(out, ", ")
}

// unusedAdaptations lists declared adaptations that matched nothing in any
// release: stale entries that would hide nothing but mislead a reader.
func (e *env) unusedAdaptations(checks []check) []string {
	var out []string
	for i := range checks {
		c := &checks[i]
		for _, side := range []struct {
			name string
			rws  []rewrite
		}{{"upstream", c.Adapt}, {"harness", c.Own}} {
			for _, rw := range side.rws {
				if e.used[c.Name+"\x00"+side.name+"\x00"+rw.String()] == 0 {
					out = append(out, fmt.Sprintf("%s: %s adaptation %v matches nothing in any release", c.Name, side.name, rw))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}
