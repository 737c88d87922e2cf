-- outbox_events.user_hash: the hash of the key of the user whose Identify call wrote the row
-- (profiles/person.ts userHashOfKey), what an erasure removes a person's rows by
-- (privacy/erasure.ts). Identify writes it with every new row.
--
-- Rows written before this column have it from their payload, whose first member is the userId
-- as the caller sent it (events/service-events.ts), written by JSON.stringify. The key is that
-- userId trimmed (JavaScript's trim: intake_padded_user_key) and escaped as pg-text.ts toPgText
-- does (`\` → `\\`, NUL → `\0`, a lone surrogate → `\uXXXX`), then SHA-256 of its UTF-8.
-- intake_outbox_user_key decodes the JSON string straight into that escaped form, since
-- PostgreSQL's own JSON reader refuses \u0000 and lone surrogates. A row with no userId first
-- (none is written so) keeps NULL. test/ops/outbox-user-hash-migration.test.ts compares the
-- result with the application's hash.

-- AlterTable
ALTER TABLE "outbox_events" ADD COLUMN "user_hash" BYTEA;

CREATE FUNCTION intake_outbox_user_key(literal text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
  token text;
  code int;
  out text := '';
BEGIN
  FOR token IN SELECT m[1] FROM regexp_matches(literal, '(\\u[0-9a-fA-F]{4}|\\.|[^\\]+)', 'g') AS m LOOP
    IF left(token, 1) <> '\' THEN
      out := out || token;
    ELSIF token = '\\' THEN
      out := out || '\\';
    ELSIF token = '\"' THEN
      out := out || '"';
    ELSIF token = '\/' THEN
      out := out || '/';
    ELSIF token = '\b' THEN
      out := out || chr(8);
    ELSIF token = '\f' THEN
      out := out || chr(12);
    ELSIF token = '\n' THEN
      out := out || chr(10);
    ELSIF token = '\r' THEN
      out := out || chr(13);
    ELSIF token = '\t' THEN
      out := out || chr(9);
    ELSE
      code := ('x' || lpad(substr(token, 3), 8, '0'))::bit(32)::int;
      IF code = 0 THEN
        out := out || '\0';
      ELSIF code BETWEEN 55296 AND 57343 THEN
        -- JSON.stringify escapes a surrogate only when it is unpaired.
        out := out || '\u' || lower(substr(token, 3));
      ELSE
        out := out || chr(code);
      END IF;
    END IF;
  END LOOP;
  RETURN coalesce(intake_padded_user_key(out), out);
END
$$;

UPDATE "outbox_events" o SET "user_hash" = sha256(convert_to(intake_outbox_user_key(k.literal), 'UTF8'))
  FROM (SELECT id, substring(payload FROM '^\{"userId":"((?:[^"\\]|\\.)*)"') AS literal FROM "outbox_events") AS k
 WHERE o.id = k.id AND k.literal IS NOT NULL;

DROP FUNCTION intake_outbox_user_key(text);
