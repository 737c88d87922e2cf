// zod-style validation issues built on yup. yup runs the schema; its tests
// create errors that carry zod's issue data (code, message and the extra
// fields of that code) in `params.issue`, and `toIssues` turns yup's
// ValidationError into the API's `issues[]`.
//
// zod v3 semantics kept here:
// - An issue is either aborting (zod returns INVALID: a wrong type, a bad enum
//   value) or "dirty" (too_small, invalid_string, custom, a float where an
//   integer is expected). `aborts: true` marks the first kind.
// - A refinement of an object (zod's refine/superRefine) runs only when no
//   issue under that object aborted. yup runs a yup object()'s own tests before
//   its fields, so such a test cannot see how the fields did: it reports anyway
//   and names the object it refines (`refines`, a yup path), and `toIssues`
//   drops the issue when an aborting issue exists at or under that path. (A
//   test that checks the fields itself can skip its refinement directly.)
import { ValidationError } from 'yup';
import type { Message, TestContext } from 'yup';

export interface Issue {
  code: string;
  path: (string | number)[];
  message: string;
  expected?: string;
  received?: string;
  [extra: string]: unknown;
}

// An issue without its path (the path comes from yup).
export interface IssueData {
  code: string;
  message: string;
  [extra: string]: unknown;
}

export interface IssueOptions {
  // zod would return INVALID for this issue (see the top of the file).
  aborts?: boolean;
  // yup path of the value a refinement belongs to ('' for the root).
  refines?: string;
  // yup path of the issue when it is not the tested value's own path.
  path?: string;
}

interface IssueParams {
  issue: IssueData;
  aborts: boolean;
  refines: string | undefined;
  [key: string]: unknown;
}

// One function for every error: yup interpolates `${...}` in string messages,
// and messages can hold caller data (an enum value), so never pass them as strings.
const issueMessage: Message = (params: Record<string, unknown>) => (params.issue as IssueData).message;

const NO_OPTIONS: IssueOptions = {};

// The error a yup test returns for one issue.
export function issueError(ctx: TestContext, issue: IssueData, options: IssueOptions = NO_OPTIONS): ValidationError {
  const params: IssueParams = {
    issue,
    aborts: options.aborts === true,
    refines: options.refines,
  };
  return ctx.createError({ path: options.path, message: issueMessage, params });
}

const ABORTS: IssueOptions = { aborts: true };

// Shorthand for an aborting issue (at the tested value's path unless given).
export function abortError(ctx: TestContext, issue: IssueData, path?: string): ValidationError {
  return issueError(ctx, issue, path === undefined ? ABORTS : { aborts: true, path });
}

// Whether an error holds an issue that aborts (yup's own failures, which carry
// no issue data, are type or presence checks: aborting too).
export function isAborting(error: ValidationError): boolean {
  if (error.inner.length > 0) return error.inner.some(isAborting);
  const params = error.params as Partial<IssueParams> | undefined;
  return params?.issue === undefined || params.aborts === true;
}

// Several issues from one test, in order (yup flattens them into `inner`).
export function issueErrors(ctx: TestContext, errors: ValidationError[]): ValidationError {
  if (errors.length === 1) return errors[0];
  return new ValidationError(errors, undefined, ctx.path, 'issues', ctx.options.disableStackTrace === true);
}

// Converts a ValidationError (validated with abortEarly: false) into issues,
// in yup's order, dropping refinement issues of objects with aborting issues.
export function toIssues(error: ValidationError): Issue[] {
  const errors = error.inner.length > 0 ? error.inner : [error];

  let abortedPaths: string[] | null = null;
  for (const e of errors) {
    if (isAborting(e)) (abortedPaths ??= []).push(e.path ?? '');
  }

  const issues: Issue[] = [];
  for (const e of errors) {
    const params = e.params as Partial<IssueParams> | undefined;
    const refines = params?.refines;
    if (refines !== undefined && abortedPaths !== null && abortedPaths.some((p) => isWithin(p, refines))) {
      continue;
    }
    issues.push(toIssue(e));
  }
  return issues;
}

function toIssue(e: ValidationError): Issue {
  const path = parsePath(e.path);
  const data = (e.params as Partial<IssueParams> | undefined)?.issue;
  if (data === undefined) {
    // Not produced by issueError (a yup built-in check): keep yup's message.
    return { code: 'custom', path, message: String(e.message) };
  }
  return issueAt(data, path);
}

// A fresh issue from issue data and a path, in zod's key order (code, the
// extra fields, path, message).
export function issueAt(data: IssueData, path: (string | number)[]): Issue {
  const { code, message, ...extra } = data;
  return { code, ...extra, path, message };
}

// Whether yup path `path` is `scope` or lies under it ('' is the root).
export function isWithin(path: string, scope: string): boolean {
  if (scope === '') return true;
  if (!path.startsWith(scope)) return false;
  if (path.length === scope.length) return true;
  const next = path.charCodeAt(scope.length);
  return next === DOT || next === OPEN;
}

const DOT = 0x2e; // .
const OPEN = 0x5b; // [
const DQUOTE = 0x22; // "
const SQUOTE = 0x27; // '
const ZERO = 0x30;
const NINE = 0x39;

// yup path string -> zod path: `consent[0].consentedAt` -> ['consent', 0,
// 'consentedAt']; `["a.b"].c` -> ['a.b', 'c']. Dotted segments are always
// strings (an object key '0' stays '0'); unquoted bracket segments of digits are
// array indexes. A quoted segment ends at the closing quote followed by `]` and
// then the end, `.` or `[`, so keys may contain quotes and brackets.
export function parsePath(path: string | undefined): (string | number)[] {
  const out: (string | number)[] = [];
  if (path === undefined || path === '') return out;
  const n = path.length;
  let start = 0; // start of the current dotted segment
  let i = 0;
  while (i < n) {
    const c = path.charCodeAt(i);
    if (c === DOT) {
      if (i > start) out.push(path.slice(start, i));
      start = ++i;
    } else if (c === OPEN) {
      if (i > start) out.push(path.slice(start, i));
      i = bracketSegment(path, i, out);
      start = i;
    } else {
      i++;
    }
  }
  if (n > start) out.push(path.slice(start));
  return out;
}

// Reads the bracket segment opening at `open`; returns the index after it.
function bracketSegment(path: string, open: number, out: (string | number)[]): number {
  const n = path.length;
  const quote = path.charCodeAt(open + 1);
  if (quote === DQUOTE || quote === SQUOTE) {
    const closing = quote === DQUOTE ? '"]' : "']";
    let end = path.indexOf(closing, open + 2);
    while (end !== -1) {
      const after = end + 2;
      const next = after < n ? path.charCodeAt(after) : -1;
      if (next === -1 || next === DOT || next === OPEN) {
        out.push(path.slice(open + 2, end));
        return after;
      }
      end = path.indexOf(closing, end + 1);
    }
    // Unterminated quote: the rest is the key.
    out.push(path.slice(open + 2));
    return n;
  }
  let end = path.indexOf(']', open + 1);
  if (end === -1) end = n;
  const inner = path.slice(open + 1, end);
  out.push(isDigits(inner) ? Number(inner) : inner);
  return end === n ? n : end + 1;
}

function isDigits(s: string): boolean {
  if (s.length === 0) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < ZERO || c > NINE) return false;
  }
  return true;
}
