module github.com/redkit-go/redkit/pgjournal

go 1.26.0

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/redkit-go/redkit/internal v0.0.0
	github.com/redkit-go/redkit/redistest v0.0.0
	github.com/redkit-go/redkit/stock v0.0.0
	github.com/redkit-go/redkit/wallet v0.0.0
	go.uber.org/goleak v1.3.0
	pgregory.net/rapid v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/redis/go-redis/extra/rediscmd/v9 v9.23.0 // indirect
	github.com/redis/go-redis/extra/redisotel/v9 v9.23.0 // indirect
	github.com/redkit-go/redkit/health v0.0.0 // indirect
	github.com/redkit-go/redkit/lock v0.0.0 // indirect
	github.com/redkit-go/redkit/otelx v0.0.0 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.opentelemetry.io/otel/metric v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)

replace (
	github.com/redkit-go/redkit/health => ../health
	github.com/redkit-go/redkit/internal => ../internal
	github.com/redkit-go/redkit/lock => ../lock
	github.com/redkit-go/redkit/otelx => ../otelx
	github.com/redkit-go/redkit/redistest => ../redistest
	github.com/redkit-go/redkit/stock => ../stock
	github.com/redkit-go/redkit/wallet => ../wallet
)
