-- 0003_identity.sql: an entry is the journal's own (its stream ID, and
-- what it says); an operation of a wallet journal is named as wallet names
-- it; a repair can send a posting again with every field its client sent.

-- The currency a credit or debit named ('' when it named none): the
-- wallet judges a call sent again against it.
ALTER TABLE wallet_entries ADD COLUMN currency text NOT NULL DEFAULT '';

-- A transfer into an account is named by its source's slot group and its
-- ID (the same ID from two groups is two transfers); '' for other kinds.
-- The group of an account is the part of its ID before the '/', or the
-- whole ID.
ALTER TABLE wallet_entries ADD COLUMN src_group text NOT NULL DEFAULT '';
UPDATE wallet_entries SET src_group = split_part(peer, '/', 1) WHERE kind = 'transfer_in';
DROP INDEX wallet_entries_op;
CREATE UNIQUE INDEX wallet_entries_op ON wallet_entries (account, op, kind, src_group) WHERE op <> '';

-- reused_id: the journal holds an entry under a stream ID the book holds
-- with other content. An anomaly is one per entry, kind and detail, so a
-- stream ID given out twice again is recorded twice.
ALTER TABLE anomalies DROP CONSTRAINT anomalies_kind_check;
ALTER TABLE anomalies ADD CONSTRAINT anomalies_kind_check
    CHECK (kind IN ('gap', 'poison', 'lost', 'duplicate_op', 'reused_id'));
ALTER TABLE anomalies DROP CONSTRAINT anomalies_module_key_bucket_stream_id_kind_key;
CREATE UNIQUE INDEX anomalies_entry ON anomalies (module, key, bucket, stream_id, kind, md5(detail));
