// docs/openapi.yaml: a valid OpenAPI 3.1 document, whose examples are valid by their own
// schemas, and a checker that catches a reply which drifted from it. (The replies of the
// whole HTTP suite go through the same checker: test/helpers/api-conformance.ts.)
import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import test from 'ava';
import { Validator } from '@seriousme/openapi-schema-validator';
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

test('the README links only files of the repository, and links the API reference', (t) => {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  t.true(readme.includes('](docs/openapi.yaml)'));
  for (const [, target] of readme.matchAll(/\]\(([^)\s]+)\)/g)) {
    if (/^[a-z]+:/i.test(target) || target.startsWith('#')) continue;
    const file = path.resolve(ROOT, target.split('#')[0]);
    t.true(file.startsWith(ROOT + path.sep) && existsSync(file), `README link ${target} stays in the repository`);
  }
});
