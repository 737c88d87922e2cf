-- Identify's idempotency records shrink to a 128-bit key of the messageId (the first half of
-- its SHA-256) and a 64-bit digest of the call it was used for (userId, timestamp and traits:
-- common/domain/call-digest.ts), instead of the messageId, userId and traits as text. A row is
-- a third of its former size and so is the write-ahead log every Identify call costs.
-- The digest is computed in TypeScript only. The calls recorded before this migration keep
-- their parts in identify_messages_legacy (call_digest NULL), read only when such a messageId
-- is used again.
ALTER TABLE "identify_messages" RENAME TO "identify_messages_legacy";
ALTER TABLE "identify_messages_legacy" RENAME CONSTRAINT "identify_messages_pkey" TO "identify_messages_legacy_pkey";
ALTER TABLE "identify_messages_legacy" ADD COLUMN "message_key" UUID;
UPDATE "identify_messages_legacy" SET "message_key" = encode(substring("message_hash" FROM 1 FOR 16), 'hex')::uuid;
ALTER TABLE "identify_messages_legacy"
  DROP CONSTRAINT "identify_messages_legacy_pkey",
  DROP COLUMN "message_id",
  DROP COLUMN "message_hash",
  ALTER COLUMN "message_key" SET NOT NULL,
  ADD CONSTRAINT "identify_messages_legacy_pkey" PRIMARY KEY ("environment_id", "message_key");

CREATE TABLE "identify_messages" (
    "environment_id" UUID NOT NULL,
    "message_key" UUID NOT NULL,
    "call_digest" BIGINT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "identify_messages_pkey" PRIMARY KEY ("environment_id", "message_key")
);
INSERT INTO "identify_messages" ("environment_id", "message_key", "created_at")
  SELECT "environment_id", "message_key", "created_at" FROM "identify_messages_legacy";
ALTER TABLE "identify_messages_legacy" DROP COLUMN "created_at";
