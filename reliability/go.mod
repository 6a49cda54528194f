module github.com/redkit-go/redkit/reliability

go 1.26.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/redis/go-redis/v9 v9.23.0
	github.com/redkit-go/redkit/health v0.0.0
	github.com/redkit-go/redkit/idgen v0.0.0
	github.com/redkit-go/redkit/internal v0.0.0
	github.com/redkit-go/redkit/lock v0.0.0
	github.com/redkit-go/redkit/otelx v0.0.0
	github.com/redkit-go/redkit/redistest v0.0.0
	github.com/redkit-go/redkit/stock v0.0.0
	github.com/redkit-go/redkit/wallet v0.0.0
	github.com/stretchr/testify v1.12.1
	go.opentelemetry.io/otel v1.47.0
	go.opentelemetry.io/otel/sdk v1.47.0
	go.opentelemetry.io/otel/sdk/metric v1.47.0
	go.opentelemetry.io/otel/trace v1.47.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/bwmarrin/snowflake v0.3.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/redis/go-redis/extra/rediscmd/v9 v9.23.0 // indirect
	github.com/redis/go-redis/extra/redisotel/v9 v9.23.0 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.opentelemetry.io/otel/metric v1.47.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

replace (
	github.com/redkit-go/redkit/health => ../health
	github.com/redkit-go/redkit/idgen => ../idgen
	github.com/redkit-go/redkit/internal => ../internal
	github.com/redkit-go/redkit/lock => ../lock
	github.com/redkit-go/redkit/otelx => ../otelx
	github.com/redkit-go/redkit/redistest => ../redistest
	github.com/redkit-go/redkit/stock => ../stock
	github.com/redkit-go/redkit/wallet => ../wallet
)
