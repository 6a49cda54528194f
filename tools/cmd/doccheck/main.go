// Command doccheck checks that redkit's documentation agrees with its code:
// Go snippets compile, and the identifiers, make targets, files and tests
// the documents name exist (see package doccheck). make docs runs it, and
// make test runs make docs.
//
//	go run -C tools ./cmd/doccheck -root ..
//
// Each finding is printed as file:line: what is wrong; the exit status is 1
// when there is one.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/redkit-go/redkit/tools/doccheck"
)

func main() {
	root := flag.String("root", ".", "the repository root (the directory of go.work)")
	flag.Parse()
	findings, err := doccheck.Check(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doccheck:", err)
		os.Exit(2)
	}
	for _, f := range findings {
		fmt.Println(f)
	}
	if len(findings) > 0 {
		fmt.Fprintf(os.Stderr, "doccheck: %d findings: the documents above disagree with the code\n", len(findings))
		os.Exit(1)
	}
}
