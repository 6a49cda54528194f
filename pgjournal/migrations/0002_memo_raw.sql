-- 0002_memo_raw.sql: a wallet memo is any UTF-8, NUL included, which a
-- PostgreSQL text value cannot hold. Such a memo is booked with its NULs
-- shown as U+FFFD in memo and its exact bytes in memo_raw (NULL otherwise).
ALTER TABLE wallet_entries ADD COLUMN memo_raw bytea;
