-- Identify reads each profile's latest address claim per channel (latest time, then latest row)
-- to leave out a claim that would change nothing (common/domain/consent.ts, claimAddsNothing).
-- With the row id in the index that read is one index entry, however many claims share a time.
DROP INDEX IF EXISTS "address_claims_profile_id_channel_at_idx";
CREATE INDEX "address_claims_profile_id_channel_at_id_idx" ON "address_claims"("profile_id", "channel", "at", "id");
