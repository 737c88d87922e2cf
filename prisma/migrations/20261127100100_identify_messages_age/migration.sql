-- The storage maintenance removes Identify's messageId records older than
-- IDENTIFY_IDEMPOTENCY_DAYS in small batches. Rows are appended in created_at order, so a
-- BRIN index finds the old ones for next to nothing on Identify's write path (a btree would
-- add an entry per call).
CREATE INDEX "identify_messages_created_at_brin" ON "identify_messages" USING BRIN ("created_at");
