package pgjournal

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Errors.
var (
	// ErrInvalid: an argument or option is malformed; nothing was changed.
	ErrInvalid = errors.New("pgjournal: invalid argument")
	// ErrSchemaTooNew: the database holds migrations this build does not
	// know (a newer version ran); this build refuses to write to it.
	ErrSchemaTooNew = errors.New("pgjournal: schema is newer than this build")
)

// Book is the book of record in one PostgreSQL schema. Its methods are safe
// for concurrent use; it owns no goroutines (the sinks run in the caller's).
type Book struct {
	pool   *pgxpool.Pool
	cfg    config
	schema string // quoted identifier
}

// Option configures a Book.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	schema  string
	onError func(error)
	backoff time.Duration
}

func newConfig() config {
	return config{schema: "pgjournal", onError: func(error) {}, backoff: 5 * time.Second}
}

// WithSchema sets the PostgreSQL schema holding the book's tables (default
// "pgjournal"; 1-63 bytes of a-z, 0-9 and _, starting with a letter or _).
func WithSchema(name string) Option {
	return optionFunc(func(c *config) { c.schema = name })
}

// WithErrorHandler sets a function that sees every error a sink recovers
// from by retrying (PostgreSQL or Redis unreachable, a commit whose outcome
// is unknown). Default: none. Nil is ignored.
func WithErrorHandler(f func(error)) Option {
	return optionFunc(func(c *config) {
		if f != nil {
			c.onError = f
		}
	})
}

// WithMaxBackoff sets the longest wait of a sink between retries after an
// error (default 5s; the first wait is 50ms, doubling). Must be positive.
func WithMaxBackoff(d time.Duration) Option {
	return optionFunc(func(c *config) { c.backoff = d })
}

var schemaRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Open checks the options, applies the embedded migrations (see Migrate)
// and returns the Book. The pool stays the caller's.
func Open(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Book, error) {
	cfg := newConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if pool == nil {
		return nil, fmt.Errorf("%w: nil pool", ErrInvalid)
	}
	if !schemaRE.MatchString(cfg.schema) {
		return nil, fmt.Errorf("%w: schema %q", ErrInvalid, cfg.schema)
	}
	if cfg.backoff <= 0 {
		return nil, fmt.Errorf("%w: max backoff %v", ErrInvalid, cfg.backoff)
	}
	b := &Book{pool: pool, cfg: cfg, schema: pgx.Identifier{cfg.schema}.Sanitize()}
	if err := b.Migrate(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// Schema returns the name of the book's schema.
func (b *Book) Schema() string { return b.cfg.schema }

// t returns the qualified name of one of the book's tables.
func (b *Book) t(name string) string { return b.schema + "." + name }
