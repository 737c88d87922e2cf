// The audit of the privacy operations (intake users …): one record per forget, and per suppress
// or unsuppress that changed something, with no trait, address or raw user ID. A record names
// the person by auditUserHash (rules.ts): the user's key under the deployment's secret.
import type pg from 'pg';
import type { Db } from '../platform/db.ts';
import { auditUserHash } from './rules.ts';

type Sql = Pick<pg.ClientBase, 'query'>;

/** Audit kinds. */
export type PrivacyAction = 'forget' | 'suppress' | 'unsuppress';

/** The deployment's secret of the audit's user hashes (deployment_secrets; made once, by the migration that added it). */
export async function readAuditSecret(sql: Sql): Promise<Buffer> {
  const { rows } = await sql.query<{ secret: Buffer }>(`SELECT secret FROM deployment_secrets WHERE name = 'privacy-audit'`);
  if (!rows.length) throw new Error('deployment_secrets holds no privacy-audit secret: run intake migrate');
  return rows[0].secret;
}

/** The audit's (and every `intake users` output's) hash of a user, hex. */
export const auditHashHex = (secret: Buffer, userHash: Buffer): string => auditUserHash(secret, userHash).toString('hex');

/** One audit record (values: auditValues). */
export const AUDIT_SQL = `INSERT INTO privacy_audit (environment_id, user_hash, action, counts, operator) VALUES ($1::uuid, $2, $3, $4, $5)`;

export function auditValues(
  environmentId: string,
  audit: { secret: Buffer; userHash: Buffer },
  action: PrivacyAction,
  counts: Record<string, number>,
  operator: string,
): unknown[] {
  return [environmentId, auditUserHash(audit.secret, audit.userHash), action, JSON.stringify(counts), operator];
}

export interface AuditEntry {
  /** The environment's path value. */
  environment: string;
  action: PrivacyAction;
  userHash: string;
  at: number;
  operator: string;
  counts: Record<string, number>;
}

export async function listAudit(db: Db, environment: { id: string; pathValue: string }): Promise<AuditEntry[]> {
  const rows = await db.privacyAudit.findMany({ where: { environmentId: environment.id }, orderBy: { id: 'asc' } });
  return rows.map((r) => ({
    environment: environment.pathValue,
    action: r.action as PrivacyAction,
    userHash: Buffer.from(r.userHash).toString('hex'),
    at: r.at.getTime(),
    operator: r.operator,
    counts: JSON.parse(r.counts) as Record<string, number>,
  }));
}
