module github.com/redkit-go/redkit/idgen

go 1.26.0
