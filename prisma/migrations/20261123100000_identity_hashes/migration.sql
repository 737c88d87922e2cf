-- Identifiers of any length (issue 10): a btree entry cannot pass ~2.7 KB, so every unique key
-- or index that held a caller's value (messageId, userId, address) now holds its SHA-256
-- (common/domain/identity-hash.ts computes it for new rows; the full value keeps its column and
-- is compared on lookup). Existing rows are keyed here with the same digest: SHA-256 of the
-- stored text's UTF-8 bytes.

-- events: one row per environment and messageId.
ALTER TABLE "events" ADD COLUMN "message_hash" BYTEA;
UPDATE "events" SET "message_hash" = sha256(convert_to("message_id", 'UTF8'));
ALTER TABLE "events" ALTER COLUMN "message_hash" SET NOT NULL;
DROP INDEX "events_environment_id_message_id_key";
CREATE UNIQUE INDEX "events_environment_id_message_hash_key" ON "events"("environment_id", "message_hash");

-- profiles: the joinable email, looked up by equality only.
DROP INDEX "profiles_environment_id_email_idx";
CREATE INDEX "profiles_email_idx" ON "profiles" USING HASH ("email");

-- profile_users: user ID → profile.
ALTER TABLE "profile_users" ADD COLUMN "user_hash" BYTEA;
UPDATE "profile_users" SET "user_hash" = sha256(convert_to("user_id", 'UTF8'));
ALTER TABLE "profile_users" ALTER COLUMN "user_hash" SET NOT NULL,
  DROP CONSTRAINT "profile_users_pkey",
  ADD CONSTRAINT "profile_users_pkey" PRIMARY KEY ("environment_id", "user_hash");

-- identify_messages: Identify idempotency.
ALTER TABLE "identify_messages" ADD COLUMN "message_hash" BYTEA;
UPDATE "identify_messages" SET "message_hash" = sha256(convert_to("message_id", 'UTF8'));
ALTER TABLE "identify_messages" ALTER COLUMN "message_hash" SET NOT NULL,
  DROP CONSTRAINT "identify_messages_pkey",
  ADD CONSTRAINT "identify_messages_pkey" PRIMARY KEY ("environment_id", "message_hash");

-- consent_decisions: one resolved decision per address and channel/purpose.
ALTER TABLE "consent_decisions" ADD COLUMN "address_hash" BYTEA;
UPDATE "consent_decisions" SET "address_hash" = sha256(convert_to("address", 'UTF8'));
ALTER TABLE "consent_decisions" ALTER COLUMN "address_hash" SET NOT NULL,
  DROP CONSTRAINT "consent_decisions_pkey",
  ADD CONSTRAINT "consent_decisions_pkey" PRIMARY KEY ("environment_id", "channel", "purpose", "address_hash");

-- journey_runs: the person, the trigger and the no-reentry key by digest.
ALTER TABLE "journey_runs" ADD COLUMN "user_hash" BYTEA, ADD COLUMN "trigger_hash" BYTEA;
UPDATE "journey_runs" SET "user_hash" = sha256(convert_to("user_id", 'UTF8')),
                          "trigger_hash" = sha256(convert_to("trigger_key", 'UTF8'));
ALTER TABLE "journey_runs" ALTER COLUMN "user_hash" SET NOT NULL, ALTER COLUMN "trigger_hash" SET NOT NULL;
DROP INDEX "journey_runs_journey_id_once_key_key";
ALTER TABLE "journey_runs" ALTER COLUMN "once_key" TYPE BYTEA USING sha256(convert_to("once_key", 'UTF8'));
CREATE UNIQUE INDEX "journey_runs_journey_id_once_key_key" ON "journey_runs"("journey_id", "once_key");
DROP INDEX "journey_runs_journey_id_trigger_key_key";
CREATE UNIQUE INDEX "journey_runs_journey_id_trigger_hash_key" ON "journey_runs"("journey_id", "trigger_hash");
DROP INDEX "journey_runs_environment_id_user_id_idx";
CREATE INDEX "journey_runs_environment_id_user_hash_idx" ON "journey_runs"("environment_id", "user_hash");

-- Hand-written (partial indexes, which Prisma's schema cannot express):
-- at most one active run per person and journey;
DROP INDEX "journey_runs_one_active";
CREATE UNIQUE INDEX "journey_runs_one_active" ON "journey_runs"("journey_id", "user_hash") WHERE "status" = 'active';
-- a new run catches up on the person's handled events (equality on the person only).
DROP INDEX "events_journey_user";
CREATE INDEX "events_journey_user" ON "events" USING HASH ("journey_user") WHERE "journey_user" IS NOT NULL;

-- intake_identify(): the same function, its keys by digest (two parameters added).
DROP FUNCTION intake_identify(uuid, text, text, text, text, bigint, bigint, text, text, jsonb, text);
CREATE FUNCTION intake_identify(
  p_env uuid,
  p_user text,          -- trimmed userId as sent (no U+0000)
  p_user_key text,      -- the same, escaped for lookup columns (common/domain/pg-text.ts)
  p_user_hash bytea,    -- its key (common/domain/identity-hash.ts)
  p_message text,       -- messageId as sent
  p_message_key text,   -- the same, escaped
  p_message_hash bytea, -- its key
  p_ts bigint,          -- the call's timestamp, null when absent
  p_call bigint,        -- the call's time: timestamp, else receipt time
  p_traits text,        -- the traits, JSON text
  p_email text,         -- joinable form of traits.email (null if none or not an address)
  p_claims jsonb,       -- [{"channel": "email"|"sms", "value": "..."}] for email/phone sent
  p_notify_channel text
) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  v_profile profiles%ROWTYPE;
  v_prior identify_messages%ROWTYPE;
  v_traits jsonb := p_traits::jsonb;
  v_fields jsonb;
  v_times jsonb;
  v_changed jsonb := '{}'::jsonb;
  v_email_written boolean := false;
  v_key text;
  v_value jsonb;
  v_last bigint;
  v_at timestamptz(3) := to_timestamp(p_call / 1000.0);
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('user:' || p_env || ':' || p_user_key, 0));

  SELECT p.* INTO v_profile FROM profile_users u JOIN profiles p ON p.id = u.profile_id
   WHERE u.environment_id = p_env AND u.user_hash = p_user_hash AND u.user_id = p_user_key FOR UPDATE OF p;
  IF FOUND AND (position('\u0000' IN v_profile.fields) > 0 OR position('\u0000' IN v_profile.trait_times) > 0) THEN
    RETURN 'slow';
  END IF;

  INSERT INTO identify_messages (environment_id, message_id, message_hash, user_id, timestamp_ms, traits)
  VALUES (p_env, p_message_key, p_message_hash, p_user_key, p_ts, p_traits)
  ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN
    SELECT * INTO v_prior FROM identify_messages WHERE environment_id = p_env AND message_hash = p_message_hash;
    IF v_prior.message_id = p_message_key AND v_prior.user_id = p_user_key AND v_prior.timestamp_ms IS NOT DISTINCT FROM p_ts
       AND position('\u0000' IN v_prior.traits) = 0 AND v_prior.traits::jsonb = v_traits THEN
      RETURN 'duplicate';
    END IF;
    RETURN 'conflict';
  END IF;

  IF v_profile.id IS NULL THEN
    v_profile.id := gen_random_uuid();
    INSERT INTO profiles (id, environment_id, updated_at) VALUES (v_profile.id, p_env, v_at);
    INSERT INTO profile_users (environment_id, user_id, user_hash, profile_id) VALUES (p_env, p_user_key, p_user_hash, v_profile.id);
    v_fields := '{}'::jsonb;
    v_times := '{}'::jsonb;
    v_profile.updated_at := v_at;
  ELSE
    v_fields := v_profile.fields::jsonb;
    v_times := v_profile.trait_times::jsonb;
  END IF;

  FOR v_key, v_value IN SELECT key, value FROM jsonb_each(v_traits) LOOP
    v_last := (v_times ->> v_key)::bigint;
    CONTINUE WHEN v_last IS NOT NULL AND p_call < v_last;
    IF NOT (v_fields ? v_key) OR (v_fields -> v_key) IS DISTINCT FROM v_value THEN
      v_changed := v_changed || jsonb_build_object(v_key, v_value);
    END IF;
    v_fields := v_fields || jsonb_build_object(v_key, v_value);
    v_times := v_times || jsonb_build_object(v_key, p_call);
    IF v_key = 'email' THEN v_email_written := true; END IF;
  END LOOP;

  UPDATE profiles SET fields = v_fields::text, trait_times = v_times::text,
         updated_at = greatest(v_profile.updated_at, v_at),
         email = CASE WHEN v_email_written THEN p_email ELSE email END
   WHERE id = v_profile.id;

  INSERT INTO address_claims (profile_id, channel, value, at)
  SELECT v_profile.id, c ->> 'channel', c ->> 'value', p_call FROM jsonb_array_elements(p_claims) AS c;

  IF v_changed <> '{}'::jsonb THEN
    INSERT INTO outbox_events (environment_id, kind, payload)
    VALUES (p_env, 'profile_fields_changed',
            jsonb_build_object('userId', p_user, 'profileId', v_profile.id, 'messageId', p_message, 'at', p_call, 'changed', v_changed)::text);
    PERFORM pg_notify(p_notify_channel, '');
  END IF;
  RETURN 'applied';
END;
$$;
