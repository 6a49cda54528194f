-- 0001_book.sql: the book of record for the stock and wallet journals.
-- Runs with search_path set to the book's schema.

-- One row per stock journal entry. A SKU split into buckets has one journal
-- per bucket; stream IDs are unique within one (sku, bucket).
CREATE TABLE stock_entries (
    sku         text        NOT NULL,
    bucket      integer     NOT NULL,
    ms          bigint      NOT NULL, -- stream ID, milliseconds part
    seq         bigint      NOT NULL, -- stream ID, sequence part
    stream_id   text        NOT NULL,
    kind        text        NOT NULL,
    op          text        NOT NULL DEFAULT '', -- order or operation ID
    buyer       text        NOT NULL DEFAULT '',
    d_available bigint      NOT NULL,
    d_reserved  bigint      NOT NULL,
    d_sold      bigint      NOT NULL,
    d_refunded  bigint      NOT NULL,
    d_supply    bigint      NOT NULL,
    available   bigint      NOT NULL, -- levels after the entry
    reserved    bigint      NOT NULL,
    sold        bigint      NOT NULL,
    refunded    bigint      NOT NULL,
    supply      bigint      NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sku, bucket, ms, seq)
);
-- An operation changes a journal once per kind: the same operation under
-- another stream ID (Redis lost the first and a retry applied it again) is
-- not booked twice.
CREATE UNIQUE INDEX stock_entries_op ON stock_entries (sku, bucket, op, kind) WHERE op <> '';

-- The projection: levels per SKU bucket, the sum of the booked entries.
CREATE TABLE stock_levels (
    sku        text        NOT NULL,
    bucket     integer     NOT NULL,
    available  bigint      NOT NULL DEFAULT 0,
    reserved   bigint      NOT NULL DEFAULT 0,
    sold       bigint      NOT NULL DEFAULT 0,
    refunded   bigint      NOT NULL DEFAULT 0,
    supply     bigint      NOT NULL DEFAULT 0,
    entries    bigint      NOT NULL DEFAULT 0,
    last_ms    bigint      NOT NULL DEFAULT 0, -- newest stream ID seen
    last_seq   bigint      NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sku, bucket)
);

CREATE VIEW stock_sku_levels AS
SELECT sku,
       sum(available)::bigint AS available,
       sum(reserved)::bigint  AS reserved,
       sum(sold)::bigint      AS sold,
       sum(refunded)::bigint  AS refunded,
       sum(supply)::bigint    AS supply,
       sum(entries)::bigint   AS entries
FROM stock_levels GROUP BY sku;

-- One row per wallet journal entry.
CREATE TABLE wallet_entries (
    account     text        NOT NULL,
    ms          bigint      NOT NULL,
    seq         bigint      NOT NULL,
    stream_id   text        NOT NULL,
    kind        text        NOT NULL,
    op          text        NOT NULL DEFAULT '', -- the transaction or hold ID
    peer        text        NOT NULL DEFAULT '',
    memo        text        NOT NULL DEFAULT '',
    d_posted    bigint      NOT NULL,
    d_held      bigint      NOT NULL,
    posted      bigint      NOT NULL, -- balances after the entry
    held        bigint      NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account, ms, seq)
);
CREATE UNIQUE INDEX wallet_entries_op ON wallet_entries (account, op, kind) WHERE op <> '';

-- The projection: balances and holds per account.
CREATE TABLE wallet_balances (
    account    text        NOT NULL PRIMARY KEY,
    posted     bigint      NOT NULL DEFAULT 0,
    held       bigint      NOT NULL DEFAULT 0,
    entries    bigint      NOT NULL DEFAULT 0,
    last_ms    bigint      NOT NULL DEFAULT 0,
    last_seq   bigint      NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- What the sink saw and could not book as an ordinary entry: a gap in a
-- journal (the levels before an entry are not what the book holds), an
-- entry it cannot read (poison), an entry deleted before it was booked, an
-- operation already booked under another stream ID.
CREATE TABLE anomalies (
    id          bigserial   PRIMARY KEY,
    module      text        NOT NULL CHECK (module IN ('stock', 'wallet')),
    key         text        NOT NULL, -- SKU or account
    bucket      integer     NOT NULL DEFAULT 0,
    stream_id   text        NOT NULL,
    kind        text        NOT NULL CHECK (kind IN ('gap', 'poison', 'lost', 'duplicate_op')),
    detail      text        NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (module, key, bucket, stream_id, kind)
);
