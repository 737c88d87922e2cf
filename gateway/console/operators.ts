// The operators of the console and admin API (docs/operations.md, "Operators"): named accounts
// with a role, their password (scrypt, a salt per account), their login sessions and API tokens
// (only SHA-256 hashes are stored, the secrets are shown once), and the audit of every change
// made through them. `intake operator …` (cli/commands/operators.ts) and the dashboard
// (gateway/console/auth.ts, admin-api.ts) both go through this module.
import { createHash, createHmac, randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import type { Db } from '../../platform/db.ts';
import { MissingError, OperatorError } from '../../operations/operator.ts';

export const ROLES = ['admin', 'read-only'] as const;
export type Role = (typeof ROLES)[number];

/** Who made a request of the console or the admin API. */
export interface SignedIn {
  name: string;
  role: Role;
}

/** The shortest password `intake operator add` accepts. */
export const PASSWORD_MIN_CHARS = 12;
const PASSWORD_MAX_CHARS = 1024;

/** 1-64 letters, digits, and `.`, `_`, `@`, `-` after the first: a name that reads the same in a log line and a URL. */
export function isValidOperatorName(name: string): boolean {
  return /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/.test(name);
}

/** Why a password cannot be an operator's, or null. */
export function passwordProblem(password: string): string | null {
  if ([...password].length < PASSWORD_MIN_CHARS) return `the password must have at least ${PASSWORD_MIN_CHARS} characters`;
  if (password.length > PASSWORD_MAX_CHARS) return `the password must have at most ${PASSWORD_MAX_CHARS} characters`;
  return null;
}

// scrypt's cost: 2^15 × 8 × 128 bytes = 32 MiB and about 0.1 s per hash on this machine type.
const SCRYPT = { N: 32768, r: 8, p: 1, keylen: 32 };
const SCRYPT_MAXMEM = 64 * 1024 * 1024;

function scryptHash(password: string, salt: Buffer, params: { N: number; r: number; p: number; keylen: number }): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password.normalize('NFC'), salt, params.keylen, { N: params.N, r: params.r, p: params.p, maxmem: SCRYPT_MAXMEM }, (err, key) =>
      err ? reject(err) : resolve(key),
    ),
  );
}

/** `scrypt$N$r$p$<salt>$<hash>` (base64): the parameters travel with the hash, so they can be raised later. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scryptHash(password, salt, SCRYPT);
  return ['scrypt', SCRYPT.N, SCRYPT.r, SCRYPT.p, salt.toString('base64'), key.toString('base64')].join('$');
}

/** Whether `password` is the one `stored` was made from (constant-time comparison). */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !hash) return false;
  const expected = Buffer.from(hash, 'base64');
  const key = await scryptHash(password, Buffer.from(salt, 'base64'), { N: Number(n), r: Number(r), p: Number(p), keylen: expected.length });
  return timingSafeEqual(key, expected);
}

/** Compared against when the name is unknown, so an unknown name costs what a wrong password does. */
let decoy: Promise<string> | undefined;

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

const TOKEN_PREFIX = 'itko_';

// ---- accounts -----------------------------------------------------------------------------

export async function addOperator(db: Db, name: string, role: Role, password: string) {
  const passwordHash = await hashPassword(password);
  const created = await db.operator.create({ data: { name, role, passwordHash } }).catch((err: { code?: string }) => {
    if (err.code === 'P2002') throw new OperatorError(`operator ${name} already exists`);
    throw err;
  });
  return { name: created.name, role: created.role as Role, createdAt: created.createdAt.getTime() };
}

/** Removes the account, its sessions and its tokens (the console and the admin API answer 401 to them from then on). */
export async function removeOperator(db: Db, name: string) {
  return db.$transaction(async (tx) => {
    const operator = await tx.operator.findUnique({ where: { name } });
    if (!operator) throw new MissingError(`operator ${name} does not exist`);
    const sessionsRevoked = await tx.operatorSession.count({ where: { operatorId: operator.id, revokedAt: null, expiresAt: { gt: new Date() } } });
    const tokensRevoked = await tx.operatorToken.count({ where: { operatorId: operator.id, revokedAt: null } });
    await tx.operator.delete({ where: { id: operator.id } });
    return { name, removed: true, sessionsRevoked, tokensRevoked };
  });
}

export async function listOperators(db: Db) {
  const operators = await db.operator.findMany({
    orderBy: { name: 'asc' },
    include: { _count: { select: { tokens: { where: { revokedAt: null } } } } },
  });
  return operators.map((o) => ({ name: o.name, role: o.role as Role, createdAt: o.createdAt.getTime(), tokens: o._count.tokens }));
}

/** Whether any operator exists: without one the dashboard is what it was before operators (read-only, loopback). */
export async function anyOperator(db: Db): Promise<boolean> {
  return (await db.operator.findFirst({ select: { id: true } })) !== null;
}

// ---- API tokens ---------------------------------------------------------------------------

/** A new admin-API token of the operator: returned once, stored as its SHA-256. */
export async function createToken(db: Db, name: string) {
  const operator = await db.operator.findUnique({ where: { name } });
  if (!operator) throw new MissingError(`operator ${name} does not exist`);
  const token = TOKEN_PREFIX + randomBytes(30).toString('base64url');
  const suffix = token.slice(-5);
  await db.operatorToken.create({ data: { operatorId: operator.id, hash: sha256(token), suffix } });
  return { name, token, suffix };
}

/** The operator a bearer token belongs to, or null (unknown, revoked, or its operator removed). */
export async function operatorOfToken(db: Db, token: string): Promise<SignedIn | null> {
  if (!token.startsWith(TOKEN_PREFIX)) return null;
  const row = await db.operatorToken.findUnique({ where: { hash: sha256(token) }, include: { operator: true } });
  if (!row || row.revokedAt) return null;
  return { name: row.operator.name, role: row.operator.role as Role };
}

// ---- sessions -----------------------------------------------------------------------------

/** How long a login lasts, whatever is done meanwhile. */
export const SESSION_MS = 12 * 3600_000;

/**
 * A new session when name and password match, else null. An unknown name is checked against a
 * decoy hash, so the answer takes as long as for a wrong password.
 */
export async function logIn(db: Db, name: string, password: string): Promise<{ sessionId: string; operator: SignedIn; expiresAt: Date } | null> {
  const operator = isValidOperatorName(name) ? await db.operator.findUnique({ where: { name } }) : null;
  const stored = operator?.passwordHash ?? (await (decoy ??= hashPassword(randomBytes(16).toString('hex'))));
  const ok = (await verifyPassword(password.slice(0, PASSWORD_MAX_CHARS), stored)) && operator !== null;
  if (!ok) return null;
  const sessionId = randomBytes(32).toString('base64url');
  const expiresAt = new Date(Date.now() + SESSION_MS);
  await db.operatorSession.create({ data: { idHash: sha256(sessionId), operatorId: operator.id, expiresAt } });
  return { sessionId, operator: { name: operator.name, role: operator.role as Role }, expiresAt };
}

/** The operator of a live session (not logged out, not expired, its operator not removed), or null. */
export async function operatorOfSession(db: Db, sessionId: string): Promise<SignedIn | null> {
  if (!/^[A-Za-z0-9_-]{43}$/.test(sessionId)) return null;
  const row = await db.operatorSession.findUnique({ where: { idHash: sha256(sessionId) }, include: { operator: true } });
  if (!row || row.revokedAt || row.expiresAt.getTime() <= Date.now()) return null;
  return { name: row.operator.name, role: row.operator.role as Role };
}

export async function logOut(db: Db, sessionId: string): Promise<void> {
  await db.operatorSession.updateMany({ where: { idHash: sha256(sessionId), revokedAt: null }, data: { revokedAt: new Date() } });
}

/**
 * The CSRF token of a session: derived from its secret id, so it needs no storage, is unguessable
 * without the cookie, and is worthless once the session ends.
 */
export function csrfTokenOf(sessionId: string): string {
  return createHmac('sha256', sessionId).update('intake csrf').digest('base64url');
}

export function csrfMatches(sessionId: string, given: string): boolean {
  const expected = Buffer.from(csrfTokenOf(sessionId));
  const actual = Buffer.from(given);
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

// ---- the audit of console and admin-API changes --------------------------------------------

/** One audit record: who (the operator's name), what, on what; `detail` holds no personal data. */
export async function auditChange(db: Db, operator: string, action: string, target: string, detail: Record<string, unknown> = {}): Promise<void> {
  await db.consoleAudit.create({ data: { operator, action, target, detail: JSON.stringify(detail) } });
}

export interface ConsoleAuditEntry {
  id: number;
  at: number;
  operator: string;
  action: string;
  target: string;
  detail: Record<string, unknown>;
}

/** The newest `limit` records, newest first; `before`: only records older than that id (the next page). */
export async function listConsoleAudit(db: Db, limit: number, before?: number): Promise<ConsoleAuditEntry[]> {
  const rows = await db.consoleAudit.findMany({
    where: before === undefined ? {} : { id: { lt: BigInt(before) } },
    orderBy: { id: 'desc' },
    take: limit,
  });
  return rows.map((r) => ({ id: Number(r.id), at: r.at.getTime(), operator: r.operator, action: r.action, target: r.target, detail: JSON.parse(r.detail) }));
}
