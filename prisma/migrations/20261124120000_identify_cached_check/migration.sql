-- Identify's cached path (common/store/identify-cached.ts) writes a batch in one statement that
-- must fail as a whole when what it assumed no longer holds: a profile changed since this
-- gateway cached it, or a messageId was already claimed. Plain SQL cannot raise an error; this
-- does, as a serialization failure, and the gateway applies the batch on its locked path instead.
-- It holds no rule of Identify: those stay in TypeScript (common/store/identify-plan.ts).
CREATE FUNCTION intake_assert_current(ok boolean) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF ok IS NOT TRUE THEN
    RAISE EXCEPTION 'identify batch: cached snapshot is stale' USING ERRCODE = 'serialization_failure';
  END IF;
  RETURN true;
END
$$;
