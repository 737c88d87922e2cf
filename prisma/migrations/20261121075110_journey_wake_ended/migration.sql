-- Hand-written: an ended run is woken too while its goal may still be reached, so the sweep's
-- index covers every run with a wake time, whatever its status.
DROP INDEX IF EXISTS "journey_runs_wake";
CREATE INDEX "journey_runs_wake" ON "journey_runs"("wake_at") WHERE "wake_at" IS NOT NULL;
