-- AlterTable
ALTER TABLE "journey_runs" ADD COLUMN     "step_trigger" TEXT,
ADD COLUMN     "wake_at" BIGINT;

-- Hand-written: the sweep reads runs to evaluate by wake time (replaces the due-time index).
DROP INDEX IF EXISTS "journey_runs_due";
CREATE INDEX "journey_runs_wake" ON "journey_runs"("wake_at") WHERE "status" = 'active' AND "wake_at" IS NOT NULL;
