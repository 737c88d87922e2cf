-- events is range-partitioned by received_at, one partition per UTC day
-- (common/store/partitions.ts makes them ahead of time; a partition is dropped whole by
-- retention). PostgreSQL cannot hold a unique index across partitions, so the messageId
-- identity moves to event_ids, one narrow row per stored event, claimed by the same
-- statement that inserts the event (common/store/events.ts).
--
-- An existing table is not copied here: it is renamed to events_legacy in an instant (the only
-- exclusive lock this takes), the new table takes every insert from then on, and the workers'
-- maintenance moves the legacy rows over in small transactions, then drops the empty table
-- (docs/operations.md#migrating-an-unpartitioned-events-table). An empty one is dropped here.
ALTER TABLE "events" RENAME TO "events_legacy";
ALTER TABLE "events_legacy" RENAME CONSTRAINT "events_pkey" TO "events_legacy_pkey";
ALTER TABLE "events_legacy" RENAME CONSTRAINT "events_environment_id_fkey" TO "events_legacy_environment_id_fkey";
ALTER INDEX "events_environment_id_message_hash_key" RENAME TO "events_legacy_environment_id_message_hash_key";
ALTER INDEX "events_environment_id_received_at_idx" RENAME TO "events_legacy_environment_id_received_at_idx";
ALTER INDEX "events_journey_user" RENAME TO "events_legacy_journey_user";

CREATE TABLE "events" (
    "id" BIGINT NOT NULL DEFAULT nextval('events_id_seq'),
    "environment_id" UUID NOT NULL,
    "message_id" TEXT NOT NULL,
    "message_hash" BYTEA NOT NULL,
    "event" TEXT NOT NULL,
    "user_id" TEXT,
    "anonymous_id" TEXT,
    "timestamp" TIMESTAMPTZ(3) NOT NULL,
    "received_at" TIMESTAMPTZ(3) NOT NULL,
    "payload" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "within_limits" BOOLEAN NOT NULL,
    "limit_reason" TEXT,
    "drives_journeys" BOOLEAN NOT NULL,
    "error" TEXT,
    "processed_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "journeys_at" TIMESTAMPTZ(3),
    "journey_user" TEXT,

    CONSTRAINT "events_pkey" PRIMARY KEY ("id", "received_at")
) PARTITION BY RANGE ("received_at");

-- The ids go on from the legacy table's (a moved row keeps its own), and the sequence outlives it.
ALTER SEQUENCE "events_id_seq" OWNED BY "events"."id";

-- The newest events of an environment; a stored event by its messageId (event_ids gives its received_at).
CREATE INDEX "events_environment_id_received_at_idx" ON "events"("environment_id", "received_at");
-- All events of a user (erasure deletes by environment_id and user_id): a hash index, since a
-- user ID may be longer than a btree entry can hold.
CREATE INDEX "events_user_id_idx" ON "events" USING HASH ("user_id");
CREATE INDEX "events_journey_user" ON "events" USING HASH ("journey_user") WHERE "journey_user" IS NOT NULL;
ALTER TABLE "events" ADD CONSTRAINT "events_environment_id_fkey" FOREIGN KEY ("environment_id") REFERENCES "environments"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- One row per environment and messageId stored in events, with the received_at that finds it.
CREATE TABLE "event_ids" (
    "environment_id" UUID NOT NULL,
    "message_hash" BYTEA NOT NULL,
    "received_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "event_ids_pkey" PRIMARY KEY ("environment_id", "message_hash")
);

DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM "events_legacy") THEN
    DROP TABLE "events_legacy";
  END IF;
END $$;
