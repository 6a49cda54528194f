module github.com/redkit-go/redkit/internal

go 1.26.0
