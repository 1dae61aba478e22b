package handlers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEveryCodeHasAStatus walks the vocabulary, every Code constant
// declared in models, and checks each has a status in httpStatus, and
// that the table holds no code the vocabulary lacks: a new code cannot be
// forgotten in the table, nor a removed one linger there.
func TestEveryCodeHasAStatus(t *testing.T) {
	vocabulary := modelCodes(t)
	if len(vocabulary) < 20 {
		t.Fatalf("found %d codes in models; is the vocabulary still there?", len(vocabulary))
	}
	for v, name := range vocabulary {
		if _, ok := httpStatus[v]; !ok {
			t.Errorf("models.%s (%s) has no HTTP status in httpStatus", name, v)
		}
	}
	for v := range httpStatus {
		if _, ok := vocabulary[v]; !ok {
			t.Errorf("httpStatus maps %s, which is not a code of models", v)
		}
	}
}

// modelCodes reads the Code constants of models from its source, value
// to name.
func modelCodes(t *testing.T) map[string]string {
	files, err := filepath.Glob("../models/*.go")
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]string{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, "Code") {
						continue
					}
					var lit *ast.BasicLit
					if i < len(vs.Values) {
						lit, _ = vs.Values[i].(*ast.BasicLit)
					}
					if lit == nil || lit.Kind != token.STRING {
						t.Errorf("%s: %s is not a string literal", path, name.Name)
						continue
					}
					v, _ := strconv.Unquote(lit.Value)
					if other, dup := codes[v]; dup {
						t.Errorf("%s and %s are both %q", other, name.Name, v)
					}
					codes[v] = name.Name
				}
			}
		}
	}
	return codes
}
