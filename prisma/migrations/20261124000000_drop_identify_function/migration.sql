-- Identify's rules run in TypeScript only (common/store/identify-plan.ts), for every call, in
-- batches (common/store/identify-batch.ts): the PL/pgSQL copy of the common case goes.
DROP FUNCTION IF EXISTS intake_identify(uuid, text, text, bytea, text, text, bytea, bigint, bigint, text, text, jsonb, text);
