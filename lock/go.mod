module github.com/redkit-go/redkit/lock

go 1.26.0
