package copied

// Normal form and adaptations. Both sides are compared as go/printer prints
// their AST with every position cleared and every comment dropped: layout,
// blank lines and comments never count, every token does. An adaptation is
// an AST rewrite of one side, applied before printing; each is declared in
// the table next to the copy it explains.

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"reflect"
	"strings"
)

var (
	posType     = reflect.TypeOf(token.NoPos)
	commentType = reflect.TypeOf((*ast.CommentGroup)(nil))
	objectType  = reflect.TypeOf((*ast.Object)(nil))
	scopeType   = reflect.TypeOf((*ast.Scope)(nil))
	exprType    = reflect.TypeOf((*ast.Expr)(nil)).Elem()
)

// walk calls fn with every node slot under v (a field or slice element
// holding an ast interface or a pointer to an ast struct), parents before
// children. fn may replace the slot's value (it is settable); it returns
// false to skip the slot's children.
func walk(v reflect.Value, fn func(slot reflect.Value) bool) {
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() || v.Type() == objectType || v.Type() == scopeType || v.Type() == commentType {
			return
		}
		if v.CanSet() && !fn(v) {
			return
		}
		e := v
		for e.Kind() == reflect.Interface || e.Kind() == reflect.Pointer {
			if e.IsNil() {
				return
			}
			e = e.Elem()
		}
		if e.Kind() != reflect.Struct {
			return
		}
		for i := 0; i < e.NumField(); i++ {
			walk(e.Field(i), fn)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			walk(v.Index(i), fn)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			walk(v.Field(i), fn)
		}
	}
}

// strip clears every position and drops every comment under n.
func strip(n ast.Node) {
	var clear func(v reflect.Value)
	clear = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if v.IsNil() || v.Type() == objectType || v.Type() == scopeType {
				return
			}
			if v.Type() == commentType {
				if v.CanSet() {
					v.Set(reflect.Zero(v.Type()))
				}
				return
			}
			clear(v.Elem())
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				f := v.Field(i)
				if f.Type() == posType && f.CanSet() {
					f.SetInt(0)
					continue
				}
				clear(f)
			}
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				clear(v.Index(i))
			}
		}
	}
	clear(reflect.ValueOf(n))
	if fd, ok := n.(*ast.FuncDecl); ok {
		fd.Doc = nil
	}
}

// render prints a stripped node (an ast.Node, or a statement list).
func render(n any) string {
	if list, ok := n.([]ast.Stmt); ok {
		n = &ast.BlockStmt{List: list}
	}
	var b bytes.Buffer
	cfg := printer.Config{Mode: printer.UseSpaces | printer.TabIndent, Tabwidth: 8}
	if err := cfg.Fprint(&b, token.NewFileSet(), n); err != nil {
		return fmt.Sprintf("<unprintable: %v>", err)
	}
	return b.String()
}

func parseExpr(src string) (ast.Expr, error) {
	e, err := parser.ParseExpr(src)
	if err != nil {
		return nil, fmt.Errorf("adaptation %q: %v", src, err)
	}
	strip(e)
	return e, nil
}

func parseStmts(src string) ([]ast.Stmt, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\nfunc _() {\n"+src+"\n}\n", parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("adaptation %q: %v", src, err)
	}
	body := f.Decls[0].(*ast.FuncDecl).Body
	strip(body)
	return body.List, nil
}

// rewrite is one declared adaptation.
type rewrite struct {
	op       string // see the constructors
	from, to string
}

// Replace replaces every expression (or type) printed as from by to:
// an identifier, a selector, a call. Names in declarations (parameters,
// field selectors) are not expressions and stay.
func Replace(from, to string) rewrite { return rewrite{op: "replace", from: from, to: to} }

// DropStmt removes every statement printed exactly as text (locking, logging).
func DropStmt(text string) rewrite { return rewrite{op: "dropStmt", from: text} }

// DropCall removes every statement that is only a call of callee (logging).
func DropCall(callee string) rewrite { return rewrite{op: "dropCall", from: callee} }

// ReplaceStmt replaces each statement whose printed form starts with prefix
// by the statements to (a part split out into a helper of its own).
func ReplaceStmt(prefix, to string) rewrite {
	return rewrite{op: "replaceStmt", from: prefix, to: to}
}

// DropParam removes the named parameter (a context or logger the harness
// supplies itself).
func DropParam(name string) rewrite { return rewrite{op: "dropParam", from: name} }

// ReceiverToParams drops the method's receiver and puts params first in the
// parameter list (a method of an unexported kubelet type turned into a
// function of the parts of the receiver it reads).
func ReceiverToParams(params string) rewrite { return rewrite{op: "recvToParams", to: params} }

// ErrorOnly turns every `return x, err` into `return err`: an inline part of
// a function returning error, copied into a function that returns its value
// too (the value's own final `return v, nil` is dropped with DropStmt).
func ErrorOnly() rewrite { return rewrite{op: "errorOnly"} }

func (r rewrite) String() string {
	switch r.op {
	case "replace":
		return fmt.Sprintf("Replace(%q, %q)", r.from, r.to)
	case "dropStmt":
		return fmt.Sprintf("DropStmt(%q)", r.from)
	case "dropCall":
		return fmt.Sprintf("DropCall(%q)", r.from)
	case "replaceStmt":
		return fmt.Sprintf("ReplaceStmt(%q, %q)", r.from, r.to)
	case "dropParam":
		return fmt.Sprintf("DropParam(%q)", r.from)
	case "recvToParams":
		return fmt.Sprintf("ReceiverToParams(%q)", r.to)
	case "errorOnly":
		return "ErrorOnly()"
	}
	return r.op
}

// apply applies r to a stripped node and reports how often it matched.
func (r rewrite) apply(n ast.Node) (int, error) {
	switch r.op {
	case "replace":
		return replaceExprs(n, r.from, r.to)
	case "dropStmt", "replaceStmt", "dropCall":
		var to []ast.Stmt
		if r.op == "replaceStmt" {
			var err error
			if to, err = parseStmts(r.to); err != nil {
				return 0, err
			}
		}
		count := 0
		eachStmtList(n, func(list *[]ast.Stmt) {
			var out []ast.Stmt
			for _, s := range *list {
				text := render(s)
				switch {
				case r.op == "dropStmt" && text == r.from:
					count++
				case r.op == "dropCall" && isCallOf(s, r.from):
					count++
				case r.op == "replaceStmt" && strings.HasPrefix(text, r.from):
					count++
					out = append(out, to...)
				default:
					out = append(out, s)
				}
			}
			*list = out
		})
		return count, nil
	case "dropParam":
		fd, ok := n.(*ast.FuncDecl)
		if !ok {
			return 0, fmt.Errorf("%v: not a function", r)
		}
		var fields []*ast.Field
		count := 0
		for _, f := range fd.Type.Params.List {
			var names []*ast.Ident
			for _, name := range f.Names {
				if name.Name == r.from {
					count++
				} else {
					names = append(names, name)
				}
			}
			if len(names) > 0 || len(f.Names) == 0 {
				f.Names = names
				fields = append(fields, f)
			}
		}
		fd.Type.Params.List = fields
		return count, nil
	case "recvToParams":
		fd, ok := n.(*ast.FuncDecl)
		if !ok || fd.Recv == nil {
			return 0, nil
		}
		e, err := parseExpr("func(" + r.to + ")")
		if err != nil {
			return 0, err
		}
		params := e.(*ast.FuncType).Params.List
		fd.Recv = nil
		fd.Type.Params.List = append(params, fd.Type.Params.List...)
		return 1, nil
	case "errorOnly":
		count := 0
		walk(reflect.ValueOf(n), func(slot reflect.Value) bool {
			if ret, ok := slot.Interface().(*ast.ReturnStmt); ok && len(ret.Results) == 2 {
				ret.Results = ret.Results[1:]
				count++
			}
			return true
		})
		return count, nil
	}
	return 0, fmt.Errorf("unknown adaptation %q", r.op)
}

func isCallOf(s ast.Stmt, callee string) bool {
	es, ok := s.(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := es.X.(*ast.CallExpr)
	return ok && render(call.Fun) == callee
}

// replaceExprs replaces every expression printed as from under n by a fresh
// parse of to; the replacement's own children are not visited.
func replaceExprs(n ast.Node, from, to string) (int, error) {
	if _, err := parseExpr(to); err != nil {
		return 0, err
	}
	count := 0
	walk(reflect.ValueOf(n), func(slot reflect.Value) bool {
		if slot.Type() != exprType || slot.IsNil() {
			return true
		}
		if render(slot.Interface()) != from {
			return true
		}
		e, _ := parseExpr(to)
		slot.Set(reflect.ValueOf(e))
		count++
		return false
	})
	return count, nil
}

// eachStmtList calls fn with every statement list under n, n's own included.
func eachStmtList(n ast.Node, fn func(*[]ast.Stmt)) {
	visit := func(x any) {
		switch s := x.(type) {
		case *ast.BlockStmt:
			fn(&s.List)
		case *ast.CaseClause:
			fn(&s.Body)
		case *ast.CommClause:
			fn(&s.Body)
		}
	}
	visit(n)
	walk(reflect.ValueOf(n), func(slot reflect.Value) bool {
		visit(slot.Interface())
		return true
	})
}

// cutFragment finds, in n's statement lists in source order, the first
// statement printed starting with from, and returns it and the statements
// after it in the same list: count in all, or (count 0) up to and including
// the first one printed starting with to.
func cutFragment(n ast.Node, from, to string, count int) ([]ast.Stmt, error) {
	var found []ast.Stmt
	var short bool
	eachStmtList(n, func(list *[]ast.Stmt) {
		if found != nil || short {
			return
		}
		for i, s := range *list {
			if !strings.HasPrefix(render(s), from) {
				continue
			}
			if count > 0 {
				if i+count > len(*list) {
					short = true
					return
				}
				found = append([]ast.Stmt(nil), (*list)[i:i+count]...)
				return
			}
			for j := i; j < len(*list); j++ {
				if strings.HasPrefix(render((*list)[j]), to) {
					found = append([]ast.Stmt(nil), (*list)[i:j+1]...)
					return
				}
			}
			short = true
			return
		}
	})
	switch {
	case short && count > 0:
		return nil, fmt.Errorf("fewer than %d statements from the one starting %q", count, from)
	case short:
		return nil, fmt.Errorf("no statement starting %q after the one starting %q", to, from)
	case found == nil:
		return nil, fmt.Errorf("no statement starting %q", from)
	}
	return found, nil
}

// calls lists, in source order, the callees (printed) of the calls under n.
func calls(n ast.Node) []string {
	var out []string
	ast.Inspect(n, func(x ast.Node) bool {
		if c, ok := x.(*ast.CallExpr); ok {
			out = append(out, render(c.Fun))
		}
		return true
	})
	return out
}

// diff is a line diff of a (want, upstream) and b (got, harness), in the
// unified style: "-" lines only upstream has, "+" lines only the harness has.
func diff(a, b string) string {
	x, y := strings.Split(strings.TrimRight(a, "\n"), "\n"), strings.Split(strings.TrimRight(b, "\n"), "\n")
	// Longest common subsequence; the functions compared are small.
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			out.WriteString("  " + x[i] + "\n")
			i++
			j++
		case j < len(y) && (i == len(x) || lcs[i][j+1] >= lcs[i+1][j]):
			out.WriteString("+ " + y[j] + "\n")
			j++
		default:
			out.WriteString("- " + x[i] + "\n")
			i++
		}
	}
	return out.String()
}
