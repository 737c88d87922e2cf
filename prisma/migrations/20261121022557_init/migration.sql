-- CreateSchema
CREATE SCHEMA IF NOT EXISTS "public";

-- CreateTable
CREATE TABLE "organizations" (
    "id" UUID NOT NULL,
    "slug" TEXT NOT NULL,
    "features" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "organizations_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "environments" (
    "id" UUID NOT NULL,
    "organization_id" UUID NOT NULL,
    "path_value" TEXT NOT NULL,
    "environment_key" TEXT NOT NULL,
    "is_production" BOOLEAN NOT NULL,
    "removed_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "environments_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "api_keys" (
    "id" UUID NOT NULL,
    "environment_id" UUID NOT NULL,
    "hash" TEXT NOT NULL,
    "suffix" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'active',
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "revoked_at" TIMESTAMPTZ(3),

    CONSTRAINT "api_keys_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "events" (
    "id" BIGSERIAL NOT NULL,
    "environment_id" UUID NOT NULL,
    "message_id" TEXT NOT NULL,
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

    CONSTRAINT "events_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "organizations_slug_key" ON "organizations"("slug");

-- CreateIndex
CREATE UNIQUE INDEX "environments_path_value_key" ON "environments"("path_value");

-- CreateIndex
CREATE UNIQUE INDEX "environments_organization_id_environment_key_key" ON "environments"("organization_id", "environment_key");

-- CreateIndex
CREATE UNIQUE INDEX "api_keys_hash_key" ON "api_keys"("hash");

-- CreateIndex
CREATE INDEX "api_keys_environment_id_idx" ON "api_keys"("environment_id");

-- CreateIndex
CREATE INDEX "events_environment_id_received_at_idx" ON "events"("environment_id", "received_at");

-- CreateIndex
CREATE UNIQUE INDEX "events_environment_id_message_id_key" ON "events"("environment_id", "message_id");

-- AddForeignKey
ALTER TABLE "environments" ADD CONSTRAINT "environments_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_environment_id_fkey" FOREIGN KEY ("environment_id") REFERENCES "environments"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "events" ADD CONSTRAINT "events_environment_id_fkey" FOREIGN KEY ("environment_id") REFERENCES "environments"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
