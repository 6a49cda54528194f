package wallet_test

//lint:file-ignore SA4006 docExample is doc.go's example as shown there, which overwrites err and res

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
	"github.com/redkit-go/redkit/wallet"
)

// docExample holds the statements of the package documentation's first
// example (doc.go), as shown there, followed by a return of what they
// leave behind. TestDoc_firstExample checks that the two agree.
func docExample(ctx context.Context, rdb redis.UniversalClient) (wallet.Balance, error) {
	led, err := wallet.New(rdb) // an invalid option is an error here
	err = led.Open(ctx, "shop-7/alice", wallet.WithCurrency("CNY"))
	err = led.Open(ctx, "shop-7/till", wallet.WithCurrency("CNY"))
	res, err := led.Credit(ctx, wallet.Tx{ID: "topup-1", Account: "shop-7/alice", Amount: 5000})
	res, err = led.Debit(ctx, wallet.Tx{ID: "order-9", Account: "shop-7/alice", Amount: 1999})
	if errors.Is(err, wallet.ErrInsufficientFunds) {
	}
	res, err = led.Transfer(ctx, wallet.Transfer{ID: "pay-3", From: "shop-7/alice", To: "shop-7/till", Amount: 500})
	bal, err := led.Balance(ctx, "shop-7/alice") // Posted, Held, Available: 2501, 0, 2501
	_ = res
	defer led.Close()
	return bal, err
}

// The package documentation's first example runs as shown: every account
// it names is opened, so the transfer is applied and the balance it prints
// is the one its comment gives.
func TestDoc_firstExample(t *testing.T) {
	snippet := docSnippet(t)
	body := funcBody(t, "doc_test.go", "docExample")
	require.True(t, strings.HasPrefix(body, snippet),
		"docExample does not start with the statements of doc.go's first example:\ndoc.go:     %s\ndocExample: %s", snippet, body)

	srv := redistest.New(t, redistest.Options{})
	bal, err := docExample(t.Context(), srv.Client())
	require.NoError(t, err)
	require.Equal(t, int64(2501), bal.Posted)
	require.Equal(t, int64(0), bal.Held)
	require.Equal(t, int64(2501), bal.Available)
	till, err := wallet.New(srv.Client())
	require.NoError(t, err)
	defer till.Close()
	tb, err := till.Balance(t.Context(), "shop-7/till")
	require.NoError(t, err)
	require.Equal(t, int64(500), tb.Posted, "the transfer reached the till")
}

// docSnippet returns the first code block of doc.go's package comment as
// Go tokens, "{ ... }" read as "{}".
func docSnippet(t *testing.T) string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	require.NoError(t, err)
	var code []string
	for _, l := range strings.Split(f.Doc.Text(), "\n") {
		if strings.HasPrefix(l, "\t") {
			code = append(code, strings.ReplaceAll(l[1:], "{ ... }", "{}"))
		} else if len(code) > 0 {
			break
		}
	}
	require.NotEmpty(t, code, "doc.go's package comment has no code block")
	return tokens(strings.Join(code, "\n"))
}

// funcBody returns the statements of the function name in file as Go tokens.
func funcBody(t *testing.T, file, name string) string {
	t.Helper()
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, 0)
	require.NoError(t, err)
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == name {
			start, end := fset.Position(fn.Body.Lbrace).Offset+1, fset.Position(fn.Body.Rbrace).Offset
			return tokens(string(src[start:end]))
		}
	}
	t.Fatalf("no func %s in %s", name, file)
	return ""
}

// tokens returns the Go tokens of src, without comments, one space apart.
func tokens(src string) string {
	var s scanner.Scanner
	fset := token.NewFileSet()
	s.Init(fset.AddFile("", -1, len(src)), []byte(src), nil, 0)
	var out []string
	for {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			return strings.Join(out, " ")
		}
		if tok == token.SEMICOLON && lit == "\n" {
			lit = ";"
		}
		if lit == "" {
			lit = tok.String()
		}
		out = append(out, lit)
	}
}
