-- Identify's common case in one round trip: a call with traits only (no consent, no joining
-- by email), whose IDs and traits hold no U+0000 (jsonb cannot). It applies the rules of
-- common/domain/trait-merge.ts (per-trait last-written time, later arrival wins on equal
-- times, values replace whole, null is a value) and writes the profile_fields_changed
-- outbox row in the same transaction. Every other call takes the TypeScript transaction in
-- common/store/profiles.ts; 'slow' asks the caller to do that instead.
--
-- Returns 'applied', 'duplicate', 'conflict' or 'slow'.
CREATE OR REPLACE FUNCTION intake_identify(
  p_env uuid,
  p_user text,          -- trimmed userId as sent (no U+0000)
  p_user_key text,      -- the same, escaped for lookup columns (common/domain/pg-text.ts)
  p_message text,       -- messageId as sent
  p_message_key text,   -- the same, escaped
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
   WHERE u.environment_id = p_env AND u.user_id = p_user_key FOR UPDATE OF p;
  IF FOUND AND (position('\u0000' IN v_profile.fields) > 0 OR position('\u0000' IN v_profile.trait_times) > 0) THEN
    RETURN 'slow';
  END IF;

  INSERT INTO identify_messages (environment_id, message_id, user_id, timestamp_ms, traits)
  VALUES (p_env, p_message_key, p_user_key, p_ts, p_traits)
  ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN
    SELECT * INTO v_prior FROM identify_messages WHERE environment_id = p_env AND message_id = p_message_key;
    IF v_prior.user_id = p_user_key AND v_prior.timestamp_ms IS NOT DISTINCT FROM p_ts
       AND position('\u0000' IN v_prior.traits) = 0 AND v_prior.traits::jsonb = v_traits THEN
      RETURN 'duplicate';
    END IF;
    RETURN 'conflict';
  END IF;

  IF v_profile.id IS NULL THEN
    v_profile.id := gen_random_uuid();
    INSERT INTO profiles (id, environment_id, updated_at) VALUES (v_profile.id, p_env, v_at);
    INSERT INTO profile_users (environment_id, user_id, profile_id) VALUES (p_env, p_user_key, v_profile.id);
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
