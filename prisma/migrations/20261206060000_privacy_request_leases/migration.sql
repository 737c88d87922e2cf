-- Privacy requests that any dashboard can resume (gateway/console/privacy-leases.ts): the user
-- ID and a forget's option while the request is open, the runs started, and the lease of the
-- dashboard process that runs it. Requests open before this migration keep no user ID: the first
-- dashboard to claim one marks it failed.
-- AlterTable
ALTER TABLE "privacy_requests" ADD COLUMN     "attempts" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "lease_owner" TEXT,
ADD COLUMN     "lease_until" TIMESTAMPTZ(3),
ADD COLUMN     "suppress" BOOLEAN NOT NULL DEFAULT false,
ADD COLUMN     "user_id" TEXT;

-- CreateIndex
CREATE INDEX "privacy_requests_status_lease_until_idx" ON "privacy_requests"("status", "lease_until");
