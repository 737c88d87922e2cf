// docs/openapi.yaml: a valid OpenAPI 3.1 document by three independent validators (the 3.1
// JSON Schema, swagger-parser, Redocly CLI's recommended lint with no warning), whose examples
// are valid by their own schemas, whose limits are the configuration's defaults, and a checker
// that catches a reply which drifted from it. (The replies of the whole HTTP suite go through
// the same checker: test/helpers/api-conformance.ts.)
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import test from 'ava';
import SwaggerParser from '@apidevtools/swagger-parser';
import { Validator } from '@seriousme/openapi-schema-validator';
import { humanDefault, statesDefault, wrongDefaults } from '../../scripts/docs/defaults.mts';
import { describeConfig } from '../../platform/config.ts';
import { escape, loadApiChecker, OPENAPI_PATH, type ObservedReply } from '../helpers/openapi.ts';

const checker = loadApiChecker();
const doc = checker.document;
const ROOT = path.resolve(path.dirname(OPENAPI_PATH), '..');

test('docs/openapi.yaml is valid against the OpenAPI 3.1 schema', async (t) => {
  const validator = new Validator();
  const result = await validator.validate(OPENAPI_PATH);
  t.deepEqual(result.errors ?? [], [], 'schema errors');
  t.true(result.valid);
  t.is(validator.version, '3.1');
});

test('swagger-parser validates it (OpenAPI 3.1 schema and its own checks)', async (t) => {
  const api = (await SwaggerParser.validate(OPENAPI_PATH)) as { openapi: string };
  t.is(api.openapi, '3.1.0');
});

test("Redocly CLI's lint (recommended rules) passes with no warning", async (t) => {
  const root = path.resolve(OPENAPI_PATH, '../..');
  const redocly = path.join(root, 'node_modules/.bin/redocly');
  // Offline: no usage report, no update check.
  const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' };
  const { code, out } = await new Promise<{ code: number; out: string }>((resolve) =>
    execFile(redocly, ['lint', '--format=summary', '--max-problems=1000', OPENAPI_PATH], { cwd: root, env, timeout: 90_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, out: stdout + stderr }),
    ),
  );
  t.is(code, 0, out);
  t.regex(out, /Your API description is valid/, out);
  // Problems are counted in the summary ("You have 2 warnings.") and listed as `warning <rule>: n` (the Node.js notice aside).
  t.notRegex(out, /You have \d+ (warning|error)|^\s*(warning|error) [\w-]+: \d+/im, out);
});

test("the limits it states are the configuration's defaults (docs:check compares every such mention)", (t) => {
  const text = readFileSync(OPENAPI_PATH, 'utf8');
  for (const name of ['TRACK_RAW_BODY_LIMIT', 'IDENTIFY_BODY_LIMIT', 'HTTP_MAX_HEADER_BYTES']) t.true(statesDefault(text, name), `${name} (default …)`);
  t.deepEqual(wrongDefaults(text), []);
  // The check can fail: a stated limit that is not the default is found.
  t.deepEqual(
    wrongDefaults('over `TRACK_RAW_BODY_LIMIT` (default 3 MiB) gets').map((w) => [w.name, w.stated, w.actual]),
    [['TRACK_RAW_BODY_LIMIT', '3 MiB', '1 MiB']],
  );
  const defaults = Object.fromEntries(describeConfig().map((s) => [s.env, s.default]));
  t.is(humanDefault(defaults.IDENTIFY_BODY_LIMIT), '5 MiB');
});

test('the document describes exactly the three endpoints of the contract', (t) => {
  const operations = Object.entries<Record<string, unknown>>(doc.paths).flatMap(([p, item]) =>
    Object.keys(item)
      .filter((k) => k !== 'parameters')
      .map((m) => `${m.toUpperCase()} ${p}`),
  );
  t.deepEqual(operations.sort(), ['GET /api/profiles/{org_slug}/{user_id}', 'POST /api/identify/{org_slug}', 'POST /api/track/{org_slug}']);
  t.deepEqual(Object.keys(doc.components.securitySchemes).sort(), ['ApiKeyHeader', 'BasicKey', 'BearerKey']);
  t.deepEqual(doc.security, [{ ApiKeyHeader: [] }, { BearerKey: [] }, { BasicKey: [] }]);
});

/** Every `examples` map of a media type, with the pointer of the schema it illustrates. */
function mediaExamples(): { where: string; schema: string; value: unknown }[] {
  const found: { where: string; schema: string; value: unknown }[] = [];
  const walk = (node: unknown, pointer: string) => {
    if (!node || typeof node !== 'object') return;
    const obj = node as Record<string, any>;
    if (obj.schema && obj.examples && !Array.isArray(obj.examples)) {
      for (const [name, ex] of Object.entries<any>(obj.examples))
        found.push({ where: `${pointer}/examples/${name}`, schema: `${pointer}/schema`, value: ex.value });
    }
    for (const [k, v] of Object.entries(obj)) walk(v, `${pointer}/${escape(k)}`);
  };
  walk(doc.paths, '/paths');
  walk(doc.components.responses, '/components/responses');
  return found;
}

test('every example of a request or response body is valid by its schema', (t) => {
  const examples = mediaExamples();
  t.true(examples.length >= 30, `${examples.length} examples`);
  for (const ex of examples) t.deepEqual(checker.validate(ex.schema, ex.value), [], ex.where);
});

test('every JSON error message of the gateway is documented', async (t) => {
  const { MESSAGES } = await import('../../gateway/errors.ts');
  const text = readFileSync(OPENAPI_PATH, 'utf8');
  for (const message of Object.values(MESSAGES)) t.true(text.includes(message), message);
});

const reply = (overrides: Partial<ObservedReply> & { headers?: Record<string, string> }): ObservedReply => {
  const headers = { 'content-type': 'application/json; charset=utf-8', ...overrides.headers };
  return {
    method: 'POST',
    path: '/api/track/acme',
    status: 202,
    text: '{"message_id":"m-1","status":"accepted"}',
    ...overrides,
    header: (name) => headers[name.toLowerCase() as keyof typeof headers],
  };
};

test('the checker accepts documented replies', (t) => {
  t.deepEqual(checker.check(reply({}))?.problems, []);
  t.deepEqual(checker.check(reply({ status: 429, text: '{"error":"Too many requests"}', headers: { 'retry-after': '1' } }))?.problems, []);
  t.deepEqual(checker.check(reply({ status: 404, text: '404 Not Found', headers: { 'content-type': 'text/plain; charset=utf-8' } }))?.problems, []);
  const wrongMethod = checker.check(reply({ method: 'GET', status: 404, text: '404 Not Found', headers: { 'content-type': 'text/plain; charset=utf-8' } }));
  t.is(wrongMethod?.operation, 'unmatched');
  t.deepEqual(wrongMethod?.problems, []);
  t.deepEqual(checker.check(reply({ method: 'GET', path: '/api/profiles/acme/u%2F1', status: 404, text: '{"error":"Profile not found"}' }))?.problems, []);
  t.deepEqual(
    checker.check(reply({ path: '/api/identify/acme', status: 409, text: JSON.stringify({ error: 'messageId a\nb was already used for a different call' }) }))
      ?.problems,
    [],
  );
  t.is(checker.check(reply({ path: '/healthz', status: 200, text: 'ok' })), null, 'not an endpoint of the contract');
});

test('the checker catches a reply that drifted from the document', (t) => {
  const problems = (r: ObservedReply) => checker.check(r)?.problems ?? [];
  t.regex(problems(reply({ status: 418 })).join(), /status 418 is not documented for POST \/api\/track\/\{org_slug\}/);
  t.regex(problems(reply({ text: '{"message_id":"m-1","status":"accepted","extra":1}' })).join(), /additional/);
  t.regex(problems(reply({ text: '{"message_id":"m-1","status":"queued"}' })).join(), /constant/);
  t.regex(problems(reply({ headers: { 'content-type': 'text/plain' } })).join(), /Content-Type/);
  t.regex(problems(reply({ status: 429, text: '{"error":"Too many requests"}' })).join(), /Retry-After is missing/);
  t.regex(problems(reply({ status: 503, text: '{"error":"Service unavailable"}' })).join(), /constant/);
  t.regex(problems(reply({ path: '/api/track/acme/', status: 404, text: '{"error":"Not found"}' })).join(), /Content-Type/);
  t.regex(
    problems(
      reply({ path: '/api/identify/acme', status: 400, text: '{"error":"Invalid Identify call","issues":[{"path":["userId"],"message":"Required"}]}' }),
    ).join(),
    /code/,
  );
  t.regex(
    problems(reply({ method: 'GET', path: '/api/profiles/acme/u-1', status: 200, text: '{"org_slug":"acme","user_id":"u-1","fields":{}}' })).join(),
    /profile_id/,
  );
});

test('the README links the API reference (npm run docs:check keeps every link of the project whole)', (t) => {
  t.true(readFileSync(path.join(ROOT, 'README.md'), 'utf8').includes('](docs/openapi.yaml)'));
});
