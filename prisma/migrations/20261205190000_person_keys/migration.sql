-- A person in every spelling, and audit records that a candidate user ID cannot confirm
-- (common/store/person.ts, common/store/privacy-audit.ts).
--
-- events.user_key: the userId trimmed, where it differs from the userId as sent (`" u-7 "`),
-- so that an erasure and an export find the person's events in every spelling the service
-- trims to their user ID; NULL for all others, which a hash index does not hold. The trim is
-- JavaScript's String.prototype.trim (person.ts paddedUserKey, which the worker applies to new
-- rows); intake_padded_user_key is the same rule for rows stored before this column existed,
-- and for a pre-partitioning events table still being moved over (storage.ts moveLegacyEvents).
-- test/unit/person-keys.test.ts holds the two equal over every UTF-16 code unit.
CREATE FUNCTION intake_padded_user_key(user_id text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT nullif(regexp_replace(user_id,
    '^[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+|[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+$',
    '', 'g'), user_id)
$$;

-- AlterTable
ALTER TABLE "events" ADD COLUMN "user_key" TEXT;

UPDATE "events" SET "user_key" = intake_padded_user_key("user_id")
 WHERE "user_id" ~ '^[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]|[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]$';

-- CreateIndex
CREATE INDEX "events_user_key_idx" ON "events" USING HASH ("user_key");

-- The deployment's secret for the audit's keyed user hashes: 256 bits from PostgreSQL's strong
-- random source (gen_random_uuid), made once here and never shown.
-- CreateTable
CREATE TABLE "deployment_secrets" (
    "name" TEXT NOT NULL,
    "secret" BYTEA NOT NULL,

    CONSTRAINT "deployment_secrets_pkey" PRIMARY KEY ("name")
);

INSERT INTO "deployment_secrets" ("name", "secret")
SELECT 'privacy-audit', sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8'));

-- The audit records written before hold the plain SHA-256 of the user's key: each becomes
-- HMAC-SHA256(secret, that hash) (RFC 2104 with PostgreSQL's sha256, the key zero-padded to
-- the 64-byte block), what domain/privacy.ts auditUserHash computes for new records.
WITH key AS (
  SELECT secret || decode(repeat('00', 64 - length(secret)), 'hex') AS k FROM "deployment_secrets" WHERE "name" = 'privacy-audit'
), pads AS (
  SELECT (SELECT decode(string_agg(lpad(to_hex(get_byte(k, i) # 54), 2, '0'), '' ORDER BY i), 'hex') FROM generate_series(0, 63) AS i) AS inner_pad,
         (SELECT decode(string_agg(lpad(to_hex(get_byte(k, i) # 92), 2, '0'), '' ORDER BY i), 'hex') FROM generate_series(0, 63) AS i) AS outer_pad
    FROM key
)
UPDATE "privacy_audit" a SET "user_hash" = sha256(pads.outer_pad || sha256(pads.inner_pad || a."user_hash")) FROM pads;
