module github.com/redkit-go/redkit/wallet

go 1.26.0
