module github.com/redkit-go/redkit/examples

go 1.26.0
