-- Privacy operations (intake users …: common/store/erasure.ts, common/store/suppression.ts).
-- identify_messages.user_key lets an erasure find a person's Identify records (64 bits of the
-- user ID's key; no index: an erasure reads one environment's records through the primary
-- key, and Identify's write pays nothing more than the column).
-- privacy_users holds tombstones and suppressions by the user ID's hash; privacy_audit
-- records each operation without personal data.
-- address_claims gets a hash index on the address: an erasure keeps the consent decisions of
-- an address another profile also claimed, and asks by the address.
-- AlterTable
ALTER TABLE "identify_messages" ADD COLUMN     "user_key" BIGINT;

-- CreateTable
CREATE TABLE "privacy_users" (
    "environment_id" UUID NOT NULL,
    "user_hash" BYTEA NOT NULL,
    "erased_at" BIGINT,
    "suppressed_at" BIGINT,
    "dropped_identify" BIGINT NOT NULL DEFAULT 0,
    "dropped_track" BIGINT NOT NULL DEFAULT 0,

    CONSTRAINT "privacy_users_pkey" PRIMARY KEY ("environment_id","user_hash")
);

-- CreateTable
CREATE TABLE "privacy_audit" (
    "id" BIGSERIAL NOT NULL,
    "environment_id" UUID NOT NULL,
    "user_hash" BYTEA NOT NULL,
    "action" TEXT NOT NULL,
    "at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "counts" TEXT NOT NULL DEFAULT '{}',
    "operator" TEXT NOT NULL,

    CONSTRAINT "privacy_audit_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "privacy_audit_environment_id_id_idx" ON "privacy_audit"("environment_id", "id");

-- CreateIndex
CREATE INDEX "address_claims_value_idx" ON "address_claims" USING HASH ("value");
