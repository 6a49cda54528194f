module github.com/redkit-go/redkit/reliability

go 1.26.0
