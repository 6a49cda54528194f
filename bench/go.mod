module github.com/redkit-go/redkit/bench

go 1.26.0
