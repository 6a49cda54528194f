package lock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestOwnerIDs_comparedInConstantTime fails when Go code of the package
// compares an owner ID with == or != or looks one up as a map key: both
// take time that depends on how many leading bytes match. Owner IDs are
// compared with crypto/subtle (sameOwner) instead.
func TestOwnerIDs_comparedInConstantTime(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			switch e := n.(type) {
			case *ast.BinaryExpr:
				if (e.Op == token.EQL || e.Op == token.NEQ) && (ownerID(e.X) || ownerID(e.Y)) && !emptyString(e.X) && !emptyString(e.Y) {
					t.Errorf("%s: owner ID compared with %s; use sameOwner", fset.Position(e.Pos()), e.Op)
				}
			case *ast.IndexExpr:
				if ownerID(e.Index) {
					t.Errorf("%s: owner ID used as a map key; compare with sameOwner", fset.Position(e.Pos()))
				}
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no source files found")
	}
}

// ownerID reports whether e names an owner ID: an identifier or field called
// owner (or ending in Owner), or a fair-mode release message's payload,
// which carries one.
func ownerID(e ast.Expr) bool {
	var name string
	switch x := e.(type) {
	case *ast.Ident:
		name = x.Name
	case *ast.SelectorExpr:
		name = x.Sel.Name
	default:
		return false
	}
	return name == "owner" || strings.HasSuffix(name, "Owner") || name == "payload"
}

func emptyString(e ast.Expr) bool {
	b, ok := e.(*ast.BasicLit)
	return ok && b.Kind == token.STRING && (b.Value == `""` || b.Value == "``")
}
