-- CreateTable
CREATE TABLE "profiles" (
    "id" UUID NOT NULL,
    "environment_id" UUID NOT NULL,
    "fields" TEXT NOT NULL DEFAULT '{}',
    "trait_times" TEXT NOT NULL DEFAULT '{}',
    "email" TEXT,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "profiles_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "profile_users" (
    "environment_id" UUID NOT NULL,
    "user_id" TEXT NOT NULL,
    "profile_id" UUID NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "profile_users_pkey" PRIMARY KEY ("environment_id","user_id")
);

-- CreateTable
CREATE TABLE "identify_messages" (
    "environment_id" UUID NOT NULL,
    "message_id" TEXT NOT NULL,
    "user_id" TEXT NOT NULL,
    "timestamp_ms" BIGINT,
    "traits" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "identify_messages_pkey" PRIMARY KEY ("environment_id","message_id")
);

-- CreateTable
CREATE TABLE "address_claims" (
    "id" BIGSERIAL NOT NULL,
    "profile_id" UUID NOT NULL,
    "channel" TEXT NOT NULL,
    "value" TEXT NOT NULL,
    "at" BIGINT NOT NULL,

    CONSTRAINT "address_claims_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "consent_decisions" (
    "environment_id" UUID NOT NULL,
    "channel" TEXT NOT NULL,
    "purpose" TEXT NOT NULL,
    "address" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "basis" TEXT,
    "source" TEXT NOT NULL,
    "proof_ref" TEXT,
    "decided_at" BIGINT NOT NULL,
    "expires_at" BIGINT,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "consent_decisions_pkey" PRIMARY KEY ("environment_id","channel","purpose","address")
);

-- CreateTable
CREATE TABLE "outbox_events" (
    "id" BIGSERIAL NOT NULL,
    "environment_id" UUID NOT NULL,
    "kind" TEXT NOT NULL,
    "payload" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "relayed_at" TIMESTAMPTZ(3),

    CONSTRAINT "outbox_events_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "profiles_environment_id_email_idx" ON "profiles"("environment_id", "email");

-- CreateIndex
CREATE INDEX "profile_users_profile_id_idx" ON "profile_users"("profile_id");

-- CreateIndex
CREATE INDEX "address_claims_profile_id_channel_at_idx" ON "address_claims"("profile_id", "channel", "at");

-- CreateIndex
CREATE INDEX "outbox_events_relayed_at_id_idx" ON "outbox_events"("relayed_at", "id");

-- AddForeignKey
ALTER TABLE "profile_users" ADD CONSTRAINT "profile_users_profile_id_fkey" FOREIGN KEY ("profile_id") REFERENCES "profiles"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "address_claims" ADD CONSTRAINT "address_claims_profile_id_fkey" FOREIGN KEY ("profile_id") REFERENCES "profiles"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
