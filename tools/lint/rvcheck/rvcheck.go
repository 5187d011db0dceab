// Package rvcheck owns the analyzer that forbids treating a Kubernetes
// metadata.resourceVersion as ordered.
//
// The API server documents resourceVersion as an opaque string: clients may
// only compare two values for equality. Parsing it as a number, ordering it
// (directly, via its length, or via a compare/sort helper) or doing arithmetic
// on it silently depends on etcd's current encoding and breaks on any other
// storage backend or aggregated API server.
package rvcheck

import (
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/types/typeutil"
)

const doc = `forbid treating a Kubernetes resourceVersion as ordered

A resourceVersion is opaque: code may compare it only with == and !=.
rvcheck reports ordering comparisons (<, >, <=, >=, also of len(rv)),
arithmetic, parsing (strconv.Parse*, strconv.Atoi, fmt.Sscan*/Fscan*,
math/big SetString/ParseFloat), compare/sort helpers (strings.Compare,
cmp.Compare, cmp.Less, slices.Sort/Max/Min, sort.Strings...) and numeric or
json.Number conversions applied to a resourceVersion value.

A resourceVersion value is a ResourceVersion field, a GetResourceVersion()
call, any field, variable or parameter whose name contains "resourceversion"
(case-insensitively), and any variable or field assigned from one of those
within the package.`

// Analyzer reports code that treats a resourceVersion as anything but an
// opaque string compared with == or !=.
var Analyzer = &analysis.Analyzer{
	Name: "rvcheck",
	Doc:  doc,
	Run:  run,
}

const rule = "resourceVersion is opaque: only == and != are allowed"

// sinks maps the full name of a function to what it does to a
// resourceVersion passed to it. strconv.Parse* is matched by prefix instead.
var sinks = map[string]string{
	"strconv.Atoi":                "parsing",
	"fmt.Sscan":                   "parsing",
	"fmt.Sscanf":                  "parsing",
	"fmt.Sscanln":                 "parsing",
	"fmt.Fscan":                   "parsing",
	"fmt.Fscanf":                  "parsing",
	"fmt.Fscanln":                 "parsing",
	"(*math/big.Int).SetString":   "parsing",
	"(*math/big.Float).SetString": "parsing",
	"(*math/big.Rat).SetString":   "parsing",
	"math/big.ParseFloat":         "parsing",
	"strings.Compare":             "ordering",
	"bytes.Compare":               "ordering",
	"cmp.Compare":                 "ordering",
	"cmp.Less":                    "ordering",
	"slices.Compare":              "ordering",
	"slices.Sort":                 "ordering",
	"slices.IsSorted":             "ordering",
	"slices.BinarySearch":         "ordering",
	"slices.Max":                  "ordering",
	"slices.Min":                  "ordering",
	"sort.Strings":                "ordering",
	"sort.StringsAreSorted":       "ordering",
	"sort.SearchStrings":          "ordering",
}

// checker holds the per-package state: the variables and fields found to
// carry a resourceVersion by assignment.
type checker struct {
	pass    *analysis.Pass
	tainted map[*types.Var]bool
}

func run(pass *analysis.Pass) (any, error) {
	c := &checker{pass: pass, tainted: make(map[*types.Var]bool)}
	c.propagate()
	for _, f := range pass.Files {
		// Generated code (deepcopy, clientsets) only copies the field; a
		// finding there could not be fixed by hand anyway.
		if ast.IsGenerated(f) {
			continue
		}
		ast.Inspect(f, c.check)
	}
	return nil, nil
}

// flow records that lhs holds a resourceVersion whenever rhs is one.
type flow struct {
	lhs *types.Var
	rhs ast.Expr
}

// propagate taints every variable or field assigned from a resourceVersion
// value, iterating to a fixpoint so chains like rv := o.ResourceVersion;
// x := rv are followed regardless of source order.
func (c *checker) propagate() {
	var flows []flow
	for _, f := range c.pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			flows = append(flows, c.flowsOf(n)...)
			return true
		})
	}
	for changed := true; changed; {
		changed = false
		for _, fl := range flows {
			if !c.tainted[fl.lhs] && c.isRV(fl.rhs) {
				c.tainted[fl.lhs] = true
				changed = true
			}
		}
	}
}

// flowsOf returns the assignments made by n.
func (c *checker) flowsOf(n ast.Node) []flow {
	switch n := n.(type) {
	case *ast.AssignStmt:
		if n.Tok != token.ASSIGN && n.Tok != token.DEFINE {
			return nil
		}
		return c.pairs(n.Lhs, n.Rhs)
	case *ast.ValueSpec:
		lhs := make([]ast.Expr, len(n.Names))
		for i, name := range n.Names {
			lhs[i] = name
		}
		return c.pairs(lhs, n.Values)
	case *ast.RangeStmt:
		return c.rangeFlows(n)
	case *ast.KeyValueExpr:
		// Only struct literal keys name a field; map literal keys are values.
		if v := c.varOf(n.Key); v != nil && v.IsField() {
			return []flow{{v, n.Value}}
		}
	}
	return nil
}

// pairs matches lhs[i] with rhs[i]. Multi-value assignments such as
// n, err := strconv.ParseUint(rv, 10, 64) carry no flow: the call itself is
// what gets reported.
func (c *checker) pairs(lhs, rhs []ast.Expr) []flow {
	if len(lhs) != len(rhs) {
		return nil
	}
	var flows []flow
	for i := range lhs {
		if v := c.varOf(lhs[i]); v != nil {
			flows = append(flows, flow{v, rhs[i]})
		}
	}
	return flows
}

// rangeFlows treats the elements of a collection of resourceVersions (and the
// keys of a map of them) as resourceVersions.
func (c *checker) rangeFlows(n *ast.RangeStmt) []flow {
	var flows []flow
	if v := c.varOf(n.Value); v != nil {
		flows = append(flows, flow{v, n.X})
	}
	t := c.pass.TypesInfo.TypeOf(n.X)
	if t == nil {
		return flows
	}
	if _, isMap := t.Underlying().(*types.Map); !isMap {
		return flows
	}
	if v := c.varOf(n.Key); v != nil {
		flows = append(flows, flow{v, n.X})
	}
	return flows
}

// varOf returns the variable or field that e names, if any.
func (c *checker) varOf(e ast.Expr) *types.Var {
	var id *ast.Ident
	switch e := ast.Unparen(e).(type) {
	case *ast.Ident:
		id = e
	case *ast.SelectorExpr:
		id = e.Sel
	default:
		return nil
	}
	v, _ := c.pass.TypesInfo.ObjectOf(id).(*types.Var)
	return v
}

// isRV reports whether e evaluates to a resourceVersion (or to a collection
// of them, a pointer to one, or a byte of one).
func (c *checker) isRV(e ast.Expr) bool {
	switch e := ast.Unparen(e).(type) {
	case *ast.Ident, *ast.SelectorExpr:
		return c.isRVVar(c.varOf(e))
	case *ast.CallExpr:
		if arg, _, ok := c.conversion(e); ok {
			return c.isRV(arg)
		}
		return c.isGetResourceVersion(e)
	case *ast.IndexExpr:
		return c.isRV(e.X)
	case *ast.StarExpr:
		return c.isRV(e.X)
	case *ast.UnaryExpr:
		return e.Op == token.AND && c.isRV(e.X)
	}
	return false
}

func (c *checker) isRVVar(v *types.Var) bool {
	if v == nil {
		return false
	}
	return c.tainted[v] || strings.Contains(strings.ToLower(v.Name()), "resourceversion")
}

// isGetResourceVersion matches the metav1.Object accessor on any type.
func (c *checker) isGetResourceVersion(call *ast.CallExpr) bool {
	sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "GetResourceVersion" || len(call.Args) != 0 {
		return false
	}
	s := c.pass.TypesInfo.Selections[sel]
	return s != nil && s.Kind() == types.MethodVal
}

// isLenOfRV matches len(rv) on a string: "the longer one is newer" is an
// ordering in disguise. len of a collection of resourceVersions is a count,
// so it is deliberately not matched (loops over it are fine).
func (c *checker) isLenOfRV(e ast.Expr) bool {
	call, ok := ast.Unparen(e).(*ast.CallExpr)
	if !ok || len(call.Args) != 1 {
		return false
	}
	id, ok := ast.Unparen(call.Fun).(*ast.Ident)
	if !ok {
		return false
	}
	if b, ok := c.pass.TypesInfo.Uses[id].(*types.Builtin); !ok || b.Name() != "len" {
		return false
	}
	return isString(c.pass.TypesInfo.TypeOf(call.Args[0])) && c.isRV(call.Args[0])
}

// isLenTrick matches len(a.ResourceVersion) > len(b) and the like. Against a
// constant, as in len(rv) > 0, len is only an emptiness check.
func (c *checker) isLenTrick(n *ast.BinaryExpr) bool {
	return c.isLenOfRV(n.X) && !c.isConst(n.Y) || c.isLenOfRV(n.Y) && !c.isConst(n.X)
}

func (c *checker) isConst(e ast.Expr) bool {
	return c.pass.TypesInfo.Types[e].Value != nil
}

// conversion returns the operand and target type of a type conversion.
func (c *checker) conversion(call *ast.CallExpr) (ast.Expr, types.Type, bool) {
	tv, ok := c.pass.TypesInfo.Types[call.Fun]
	if !ok || !tv.IsType() || len(call.Args) != 1 {
		return nil, nil, false
	}
	return call.Args[0], tv.Type, true
}

// check reports the violations rooted at n.
func (c *checker) check(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.BinaryExpr:
		c.checkBinary(n)
	case *ast.IncDecStmt:
		if c.isRV(n.X) {
			c.report(n, "arithmetic with "+n.Tok.String())
		}
	case *ast.AssignStmt:
		c.checkOpAssign(n)
	case *ast.CallExpr:
		c.checkConversion(n)
		c.checkSink(n)
	}
	return true
}

func (c *checker) checkBinary(n *ast.BinaryExpr) {
	switch {
	case isOrdering(n.Op):
		if c.isRV(n.X) || c.isRV(n.Y) || c.isLenTrick(n) {
			c.report(n, "ordering with "+n.Op.String())
		}
	case isArithmetic(n.Op, c.pass.TypesInfo.TypeOf(n)):
		if c.isRV(n.X) || c.isRV(n.Y) {
			c.report(n, "arithmetic with "+n.Op.String())
		}
	}
}

// checkOpAssign reports rv -= 1 and friends; plain = and := are allowed.
func (c *checker) checkOpAssign(n *ast.AssignStmt) {
	if n.Tok < token.ADD_ASSIGN || n.Tok > token.AND_NOT_ASSIGN || len(n.Lhs) != 1 {
		return
	}
	op := n.Tok + token.ADD - token.ADD_ASSIGN
	if !isArithmetic(op, c.pass.TypesInfo.TypeOf(n.Lhs[0])) {
		return
	}
	if c.isRV(n.Lhs[0]) || c.isRV(n.Rhs[0]) {
		c.report(n, "arithmetic with "+n.Tok.String())
	}
}

// checkConversion reports json.Number(rv) and numeric conversions such as
// float64(rv): both treat the value as a number.
func (c *checker) checkConversion(call *ast.CallExpr) {
	arg, target, ok := c.conversion(call)
	if !ok || (!isNumeric(target) && !isJSONNumber(target)) || !c.isRV(arg) {
		return
	}
	qualifier := func(p *types.Package) string { return p.Name() }
	c.report(call, "conversion to "+types.TypeString(target, qualifier))
}

// checkSink reports a resourceVersion handed to a parsing or ordering
// function. Arguments are searched, not just matched, so that
// strconv.Atoi(strings.TrimSpace(rv)) and fmt.Fscan(strings.NewReader(rv), &n)
// are caught too.
func (c *checker) checkSink(call *ast.CallExpr) {
	fn := typeutil.StaticCallee(c.pass.TypesInfo, call)
	if fn == nil {
		return
	}
	verb, ok := sinkVerb(fn)
	if !ok {
		return
	}
	for _, arg := range call.Args {
		if c.mentionsRV(arg) {
			c.report(call, verb+" with "+shortName(fn))
			return
		}
	}
}

// mentionsRV reports whether e contains a resourceVersion value. Function
// literals are not entered: their bodies are checked on their own.
func (c *checker) mentionsRV(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok || found {
			return false
		}
		if x, ok := n.(ast.Expr); ok && c.isRV(x) {
			found = true
		}
		return !found
	})
	return found
}

func (c *checker) report(n ast.Node, what string) {
	c.pass.Reportf(n.Pos(), "%s (%s)", rule, what)
}

func sinkVerb(fn *types.Func) (string, bool) {
	fn = fn.Origin()
	if fn.Pkg() != nil && fn.Pkg().Path() == "strconv" && strings.HasPrefix(fn.Name(), "Parse") {
		return "parsing", true
	}
	verb, ok := sinks[fn.FullName()]
	return verb, ok
}

// shortName renders fn as it is usually written: strconv.Atoi, big.Int.SetString.
func shortName(fn *types.Func) string {
	recv := fn.Signature().Recv()
	if recv == nil {
		return fn.Pkg().Name() + "." + fn.Name()
	}
	qualifier := func(p *types.Package) string { return p.Name() }
	recvType := types.Unalias(recv.Type())
	if ptr, ok := recvType.(*types.Pointer); ok {
		recvType = ptr.Elem()
	}
	return types.TypeString(recvType, qualifier) + "." + fn.Name()
}

func isOrdering(op token.Token) bool {
	return op == token.LSS || op == token.GTR || op == token.LEQ || op == token.GEQ
}

// isArithmetic reports whether op computes a number from operands of type t.
// + is only arithmetic on numbers: on strings it is concatenation, which is
// allowed (building log lines, cache keys).
func isArithmetic(op token.Token, t types.Type) bool {
	switch op {
	case token.SUB, token.MUL, token.QUO, token.REM,
		token.AND, token.OR, token.XOR, token.SHL, token.SHR, token.AND_NOT:
		return true
	case token.ADD:
		return isNumeric(t)
	}
	return false
}

func isNumeric(t types.Type) bool {
	if t == nil {
		return false
	}
	b, ok := t.Underlying().(*types.Basic)
	return ok && b.Info()&types.IsNumeric != 0
}

func isString(t types.Type) bool {
	if t == nil {
		return false
	}
	b, ok := t.Underlying().(*types.Basic)
	return ok && b.Info()&types.IsString != 0
}

func isJSONNumber(t types.Type) bool {
	named, ok := types.Unalias(t).(*types.Named)
	if !ok {
		return false
	}
	obj := named.Obj()
	return obj.Pkg() != nil && obj.Pkg().Path() == "encoding/json" && obj.Name() == "Number"
}
