-- AlterTable
ALTER TABLE "events" ADD COLUMN     "journey_user" TEXT,
ADD COLUMN     "journeys_at" TIMESTAMPTZ(3);

-- CreateTable
CREATE TABLE "journeys" (
    "id" UUID NOT NULL,
    "environment_id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "definition" TEXT NOT NULL,
    "event_names" TEXT[],
    "entry_trait" TEXT,
    "published_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "journeys_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "journey_runs" (
    "id" UUID NOT NULL,
    "journey_id" UUID NOT NULL,
    "environment_id" UUID NOT NULL,
    "user_id" TEXT NOT NULL,
    "trigger_key" TEXT NOT NULL,
    "once_key" TEXT,
    "status" TEXT NOT NULL,
    "step" INTEGER NOT NULL,
    "step_started_at" BIGINT NOT NULL,
    "waiting_for" TEXT,
    "due_at" BIGINT,
    "entered_at" BIGINT NOT NULL,
    "converted_at" BIGINT,
    "ended_at" BIGINT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "journey_runs_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "journey_messages" (
    "id" BIGSERIAL NOT NULL,
    "run_id" UUID NOT NULL,
    "journey_id" UUID NOT NULL,
    "step" INTEGER NOT NULL,
    "channel" TEXT NOT NULL,
    "template" TEXT NOT NULL,
    "address" TEXT,
    "status" TEXT NOT NULL,
    "reason" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "journey_messages_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "journeys_environment_id_published_at_idx" ON "journeys"("environment_id", "published_at");

-- CreateIndex
CREATE INDEX "journey_runs_environment_id_user_id_idx" ON "journey_runs"("environment_id", "user_id");

-- CreateIndex
CREATE UNIQUE INDEX "journey_runs_journey_id_trigger_key_key" ON "journey_runs"("journey_id", "trigger_key");

-- CreateIndex
CREATE UNIQUE INDEX "journey_runs_journey_id_once_key_key" ON "journey_runs"("journey_id", "once_key");

-- CreateIndex
CREATE INDEX "journey_messages_journey_id_idx" ON "journey_messages"("journey_id");

-- CreateIndex
CREATE UNIQUE INDEX "journey_messages_run_id_step_key" ON "journey_messages"("run_id", "step");

-- AddForeignKey
ALTER TABLE "journey_runs" ADD CONSTRAINT "journey_runs_journey_id_fkey" FOREIGN KEY ("journey_id") REFERENCES "journeys"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "journey_messages" ADD CONSTRAINT "journey_messages_run_id_fkey" FOREIGN KEY ("run_id") REFERENCES "journey_runs"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- Hand-written (Prisma's schema cannot express partial indexes; the diff tool compares
-- schemas, so these stay out of its way):
-- at most one active run per person and journey, whatever the reentry setting;
CREATE UNIQUE INDEX "journey_runs_one_active" ON "journey_runs"("journey_id", "user_id") WHERE "status" = 'active';
-- the timer sweep reads due runs in due order;
CREATE INDEX "journey_runs_due" ON "journey_runs"("due_at") WHERE "status" = 'active' AND "due_at" IS NOT NULL;
-- a new run catches up on the person's events the engine already handled (few rows: only
-- events whose name a published journey uses get journey_user).
CREATE INDEX "events_journey_user" ON "events"("environment_id", "journey_user", "received_at") WHERE "journey_user" IS NOT NULL;
