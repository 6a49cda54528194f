module github.com/redkit-go/redkit/otelx

go 1.26.0
