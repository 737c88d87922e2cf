// docs/admin-openapi.yaml: a valid OpenAPI 3.1 document by the validators docs/openapi.yaml
// passes (the 3.1 JSON Schema, swagger-parser, Redocly CLI's recommended lint with no warning),
// describing exactly the admin API's routes, each behind the operator's token or session.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import SwaggerParser from '@apidevtools/swagger-parser';
import { Validator } from '@seriousme/openapi-schema-validator';
import { parse } from 'yaml';
import { adminApi } from '../../gateway/console/admin-api.ts';
import type { OperatorDeps } from '../../operations/operator.ts';
import type { Db } from '../../platform/db.ts';
import { createLogger } from '../../platform/logger.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const DOC = path.join(ROOT, 'docs/admin-openapi.yaml');

test('it is valid against the OpenAPI 3.1 schema', async (t) => {
  const validator = new Validator();
  const result = await validator.validate(DOC);
  t.deepEqual(result.errors ?? [], [], 'schema errors');
  t.true(result.valid);
  t.is(validator.version, '3.1');
});

test('swagger-parser validates it (OpenAPI 3.1 schema, references and its own checks)', async (t) => {
  const api = (await SwaggerParser.validate(DOC)) as { openapi: string };
  t.is(api.openapi, '3.1.0');
});

test("Redocly CLI's lint (recommended rules) passes with no warning", async (t) => {
  const redocly = path.join(ROOT, 'node_modules/.bin/redocly');
  const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' };
  const { code, out } = await new Promise<{ code: number; out: string }>((resolve) =>
    execFile(redocly, ['lint', '--format=summary', '--max-problems=1000', DOC], { cwd: ROOT, env, timeout: 90_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, out: stdout + stderr }),
    ),
  );
  t.is(code, 0, out);
  t.regex(out, /Your API description is valid/, out);
  t.notRegex(out, /You have \d+ (warning|error)|^\s*(warning|error) [\w-]+: \d+/im, out);
});

test("it describes exactly the API's routes, every one behind an operator's token or session", (t) => {
  const doc = parse(readFileSync(DOC, 'utf8')) as { paths: Record<string, Record<string, { security?: unknown[] }>>; security: unknown[] };
  const documented = Object.entries(doc.paths).flatMap(([p, item]) =>
    Object.keys(item)
      .filter((k) => k !== 'parameters')
      .map((m) => `${m.toUpperCase()} ${p}`),
  );
  // Built without touching the database or Redis: only its routes are read.
  const api = adminApi({ db: {} as Db, operator: {} as OperatorDeps, log: createLogger('silent', 'test') });
  t.deepEqual(documented.sort(), [...api.operations].sort());
  t.deepEqual(doc.security, [{ OperatorToken: [] }, { Session: [] }]);
  for (const item of Object.values(doc.paths)) for (const [method, op] of Object.entries(item)) if (method !== 'parameters') t.is(op.security, undefined);
});
