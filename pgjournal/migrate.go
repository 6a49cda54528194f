package pgjournal

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Migrations are plain SQL files, applied in the order of their numbers and
// recorded in schema_migrations. A kept migration library would bring its
// own lock, table and dependencies for what is a loop over a directory.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

func migrations() ([]migration, error) {
	files, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, f := range files {
		base := strings.TrimPrefix(f, "migrations/")
		v, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("pgjournal: migration %s: no version number", base)
		}
		b, err := migrationFS.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: base, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// lockKey is the advisory lock that serializes migrations of one schema
// across processes.
func (b *Book) lockKey() int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("pgjournal migrate " + b.cfg.schema))
	return int64(h.Sum64())
}

// Migrate brings the book's schema to this build's version, in one
// transaction under a transaction-scoped advisory lock: processes starting
// at once wait for each other, and the ones that come second find the
// migrations applied. A schema with a version this build does not know is
// ErrSchemaTooNew. Open calls it.
func (b *Book) Migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", b.lockKey()); err != nil {
			return err
		}
		// A schema already at this version needs no DDL, so a role with
		// no CREATE privilege (see SECURITY.md) can open the book.
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", b.t("schema_migrations")).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+b.schema); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `CREATE TABLE `+b.t("schema_migrations")+` (
				version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
				return err
			}
		}
		var have int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+b.t("schema_migrations")).Scan(&have); err != nil {
			return err
		}
		if n := len(ms); n > 0 && have > ms[n-1].version {
			return fmt.Errorf("%w: schema %s is at version %d, this build knows %d", ErrSchemaTooNew, b.cfg.schema, have, ms[n-1].version)
		}
		if n := len(ms); n == 0 || have == ms[n-1].version {
			return nil
		}
		if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+b.schema); err != nil {
			return err
		}
		for _, m := range ms {
			if m.version <= have {
				continue
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO "+b.t("schema_migrations")+" (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgjournal: migrate %s: %w", b.cfg.schema, err)
	}
	return nil
}
