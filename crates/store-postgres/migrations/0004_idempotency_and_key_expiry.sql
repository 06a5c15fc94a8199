-- Idempotency keys of HTTP writes (issue 30): a key's first answer, kept a day (`status`
-- NULL while the request runs), claimed by one statement so daemons sharing the database
-- agree on which of them runs it. And API keys' expiry and last use.
CREATE TABLE idempotency_keys (
    scope text NOT NULL,
    key text NOT NULL,
    fingerprint text NOT NULL,
    created_at bigint NOT NULL,
    status integer,
    content_type text,
    body bytea,
    PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
ALTER TABLE api_keys ADD COLUMN expires_at bigint;
ALTER TABLE api_keys ADD COLUMN last_used_at bigint;
