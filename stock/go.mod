module github.com/redkit-go/redkit/stock

go 1.26.0
