// Checks an HTTP reply of the gateway against docs/openapi.yaml: the status must be documented
// for the operation (or, for a path or method no operation has, be the documented plain-text
// 404), the Content-Type one of the response's media types, the body valid against its schema
// (ajv, JSON Schema 2020-12 as OpenAPI 3.1 uses), and every required response header present
// and valid. test/helpers/http.ts and test/fuzz/client.ts run every reply through it, so the
// document cannot drift from what the service answers.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { parse } from 'yaml';

export const OPENAPI_PATH = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../docs/openapi.yaml');
const DOC_ID = 'https://intake.local/docs/openapi.yaml';

export interface ObservedReply {
  method: string;
  /** The request target as sent (query included). */
  path: string;
  status: number;
  /** Response header lookup, case-insensitive. */
  header(name: string): string | undefined;
  text: string;
}

/** Which documented operation (or the unmatched 404) a reply belongs to, and what was wrong with it. */
export interface Verdict {
  /** `POST /api/track/{org_slug}`, or `unmatched` for a path or method no operation has. */
  operation: string;
  status: number;
  problems: string[];
}

type Json = Record<string, any>;

/**
 * The paths of the three endpoints and everything beside them (trailing slashes, extra
 * segments: the plain-text 404). Other paths are not the contract's: health probes, metrics,
 * and the dashboard's own /api/queues on its port.
 */
const ENDPOINTS = /^\/api\/(identify|track|profiles)(\/|$)/;

interface Template {
  template: string;
  regex: RegExp;
}

export interface ApiChecker {
  document: Json;
  /** null when the path is not one of the three endpoints' (see ENDPOINTS). */
  check(reply: ObservedReply): Verdict | null;
  /** Compiles the validator of every documented response body and header up front. */
  compileAll(): void;
  /** Validates a value against the schema at a JSON pointer of the document. */
  validate(pointer: string, value: unknown): string[];
}

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

/** Whether a request path is one of the three endpoints' (cheap: decides whether a reply is checked at all). */
export function isEndpointPath(requestPath: string): boolean {
  return ENDPOINTS.test(requestPath.split('?')[0]);
}

/** `endpoints`: the request paths the document describes (others are not checked: check() gives null). */
export function loadApiChecker(file = OPENAPI_PATH, endpoints: RegExp = ENDPOINTS): ApiChecker {
  const document = parse(readFileSync(file, 'utf8')) as Json;
  // The whole document is one schema resource, so `#/components/...` refs inside schemas
  // resolve; OpenAPI's own keywords (paths, info…) are unknown keywords to ajv (strict off).
  const ajv = addFormats(new Ajv2020({ strict: false, allErrors: true }));
  ajv.addSchema({ ...document, $id: DOC_ID });
  const compiled = new Map<string, ValidateFunction>();
  const validate = (pointer: string, value: unknown): string[] => {
    let fn = compiled.get(pointer);
    if (!fn) compiled.set(pointer, (fn = ajv.compile({ $ref: `${DOC_ID}#${pointer}` })));
    if (fn(value)) return [];
    return (fn.errors ?? []).map((e) => `${e.instancePath || '(body)'} ${e.message}${e.params ? ' ' + JSON.stringify(e.params) : ''}`);
  };
  const templates: Template[] = Object.keys(document.paths).map((template) => ({
    template,
    // A path parameter is one non-empty segment, as the router matches it.
    regex: new RegExp('^' + template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+') + '$'),
  }));
  const resolve = (pointer: string): { pointer: string; value: Json } => {
    let value = at(document, pointer);
    while (value && typeof value.$ref === 'string') {
      pointer = value.$ref.slice(1);
      value = at(document, pointer);
    }
    return { pointer, value };
  };

  return {
    document,
    validate,
    compileAll() {
      for (const [template, item] of Object.entries<Json>(document.paths)) {
        for (const [method, operation] of Object.entries<Json>(item)) {
          if (method === 'parameters') continue;
          for (const status of Object.keys(operation.responses)) {
            const response = resolve(`/paths/${escape(template)}/${method}/responses/${status}`);
            for (const mediaType of Object.keys(response.value.content ?? {})) validate(`${response.pointer}/content/${escape(mediaType)}/schema`, undefined);
            for (const name of Object.keys(response.value.headers ?? {}))
              validate(`${resolve(`${response.pointer}/headers/${escape(name)}`).pointer}/schema`, undefined);
          }
        }
      }
      validate('/components/responses/NotFound/content/text~1plain/schema', undefined);
    },
    check(reply) {
      const pathname = reply.path.split('?')[0];
      if (!endpoints.test(pathname)) return null;
      const method = reply.method.toLowerCase();
      const matched = templates.find((t) => t.regex.test(pathname));
      const operation = matched && method in document.paths[matched.template] ? `${reply.method.toUpperCase()} ${matched.template}` : 'unmatched';
      let response: { pointer: string; value: Json } | undefined;
      if (operation === 'unmatched') {
        response = reply.status === 404 ? resolve('/components/responses/NotFound') : undefined;
      } else {
        const responses = `/paths/${escape(matched!.template)}/${method}/responses`;
        const documented = at(document, responses)?.[String(reply.status)];
        if (documented) response = resolve(`${responses}/${reply.status}`);
      }
      if (!response) return { operation, status: reply.status, problems: [`status ${reply.status} is not documented for ${operation}`] };
      return { operation, status: reply.status, problems: responseProblems(response, reply, resolve, validate) };
    },
  };
}

function responseProblems(
  response: { pointer: string; value: Json },
  reply: ObservedReply,
  resolve: (pointer: string) => { pointer: string; value: Json },
  validate: (pointer: string, value: unknown) => string[],
): string[] {
  const problems: string[] = [];
  for (const [name, declared] of Object.entries<Json>(response.value.headers ?? {})) {
    const header = resolve(`${response.pointer}/headers/${escape(name)}`);
    const value = reply.header(name);
    if (value === undefined) {
      if (declared.required || header.value.required) problems.push(`header ${name} is missing`);
      continue;
    }
    problems.push(...validate(`${header.pointer}/schema`, value).map((p) => `header ${name}: ${p}`));
  }
  const content: Json | undefined = response.value.content;
  // A HEAD reply carries no body by HTTP's rules, whatever its Content-Type announces.
  if (reply.method.toUpperCase() === 'HEAD') return problems;
  if (!content) {
    if (reply.text !== '') problems.push(`a body was sent where none is documented: ${JSON.stringify(reply.text.slice(0, 200))}`);
    return problems;
  }
  const mediaType = (reply.header('content-type') ?? '').split(';')[0].trim().toLowerCase();
  if (!(mediaType in content)) {
    problems.push(`Content-Type ${JSON.stringify(reply.header('content-type'))} is not one of ${Object.keys(content).join(', ')}`);
    return problems;
  }
  let body: unknown = reply.text;
  if (mediaType === 'application/json') {
    try {
      body = JSON.parse(reply.text);
    } catch {
      problems.push(`the body is not JSON: ${JSON.stringify(reply.text.slice(0, 200))}`);
      return problems;
    }
  }
  problems.push(...validate(`${response.pointer}/content/${escape(mediaType)}/schema`, body));
  return problems;
}

/** JSON pointer escaping of one segment. */
export function escape(segment: string): string {
  return segment.replaceAll('~', '~0').replaceAll('/', '~1');
}

function at(document: Json, pointer: string): any {
  let value: any = document;
  for (const raw of pointer.split('/').slice(1)) {
    value = value?.[raw.replaceAll('~1', '/').replaceAll('~0', '~')];
  }
  return value;
}
