// The admin API's privacy requests (forget, suppress, unsuppress, export): each is a row of
// privacy_requests with an id and a status (pending → running → succeeded | failed) that an
// operator polls, as with Segment's Regulations API. The dashboard process that took a request
// runs it at once with the functions `intake users` runs (operations/people.ts,
// privacy/person-export.ts), so the erasure, the suppression, their audit records (naming the
// operator) and the gateways' notification are the command's own. No raw user ID is stored: a
// request names the person by the privacy audit's keyed hash. An export's document is written to
// a file only this process's user can read, served to admins, and deleted after EXPORT_KEEP_MS.
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { poolOf, type Db } from '../../platform/db.ts';
import type { Logger } from '../../platform/logger.ts';
import { forgetPerson, suppressPerson, unsuppressPerson } from '../../operations/people.ts';
import type { OperatorDeps } from '../../operations/operator.ts';
import { auditHashHex, readAuditSecret } from '../../privacy/audit.ts';
import { exportPerson } from '../../privacy/person-export.ts';
import { MissingError, OperatorError } from '../../operations/operator.ts';
import { userHashOf } from '../../profiles/person.ts';
import { auditChange, type SignedIn } from './operators.ts';

export const PRIVACY_ACTIONS = ['forget', 'suppress', 'unsuppress', 'export'] as const;
export type PrivacyAction = (typeof PRIVACY_ACTIONS)[number];

/** How long an export's document can be downloaded. */
export const EXPORT_KEEP_MS = 3600_000;

export interface PrivacyRequestView {
  id: string;
  action: PrivacyAction;
  status: 'pending' | 'running' | 'succeeded' | 'failed';
  environment: string;
  operator: string;
  userHash: string;
  createdAt: number;
  startedAt: number | null;
  finishedAt: number | null;
  /** What was done, without personal data (counts, hashes, times); null until it succeeded. */
  result: Record<string, unknown> | null;
  error: string | null;
}

type Row = {
  id: string;
  action: string;
  status: string;
  operator: string;
  userHash: string;
  createdAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
  result: string | null;
  error: string | null;
};

function view(row: Row, environment: string): PrivacyRequestView {
  return {
    id: row.id,
    action: row.action as PrivacyAction,
    status: row.status as PrivacyRequestView['status'],
    environment,
    operator: row.operator,
    userHash: row.userHash,
    createdAt: row.createdAt.getTime(),
    startedAt: row.startedAt?.getTime() ?? null,
    finishedAt: row.finishedAt?.getTime() ?? null,
    result: row.result === null ? null : (JSON.parse(row.result) as Record<string, unknown>),
    error: row.error,
  };
}

export interface PrivacyRequests {
  submit(
    by: SignedIn,
    env: { id: string; pathValue: string },
    action: PrivacyAction,
    userId: string,
    options: { suppress: boolean },
  ): Promise<PrivacyRequestView>;
  get(id: string): Promise<PrivacyRequestView | null>;
  /** The export's document file while it is kept, else null. */
  exportFile(id: string): Promise<string | null>;
  /** Waits (a bounded time) for the requests this process runs, then deletes the exports' files. */
  close(): Promise<void>;
}

export function createPrivacyRequests(deps: { db: Db; operator: OperatorDeps; log: Logger }): PrivacyRequests {
  const { db, operator, log } = deps;
  const running = new Set<Promise<void>>();
  /** The requests this process runs now, by id. */
  const active = new Set<string>();
  const exports = new Map<string, { file: string; timer: NodeJS.Timeout }>();
  let folder: Promise<string> | undefined;

  const finish = (id: string, data: { status: 'succeeded' | 'failed'; result?: unknown; error?: string }) =>
    db.privacyRequest.update({
      where: { id },
      data: {
        status: data.status,
        finishedAt: new Date(),
        result: data.result === undefined ? null : JSON.stringify(data.result),
        error: data.error ?? null,
      },
    });

  async function perform(id: string, by: SignedIn, env: { id: string; pathValue: string }, action: PrivacyAction, userId: string, suppress: boolean) {
    switch (action) {
      case 'forget': {
        // The user IDs joined to the person are personal data: only their number is kept.
        const { joinedUserIds, ...summary } = await forgetPerson(operator, env, userId, { suppress, operator: by.name });
        return { ...summary, joinedUserIds: joinedUserIds.length };
      }
      case 'suppress':
        return suppressPerson(operator, env, userId, by.name);
      case 'unsuppress':
        return unsuppressPerson(operator, env, userId, by.name);
      case 'export': {
        const dir = await (folder ??= mkdtemp(path.join(tmpdir(), 'intake-exports-')));
        const file = path.join(dir, `${id}.json`);
        const out = createWriteStream(file, { mode: 0o600 });
        const pool = poolOf(db);
        try {
          await exportPerson(pool, env.id, userId, await readAuditSecret(pool), out);
        } finally {
          await new Promise<void>((resolve) => out.end(resolve));
        }
        const timer = setTimeout(() => void forgetExport(id), EXPORT_KEEP_MS).unref();
        exports.set(id, { file, timer });
        return { bytes: (await stat(file)).size, availableUntil: Date.now() + EXPORT_KEEP_MS };
      }
    }
  }

  async function forgetExport(id: string) {
    const kept = exports.get(id);
    if (!kept) return;
    exports.delete(id);
    clearTimeout(kept.timer);
    await rm(kept.file, { force: true });
  }

  function run(id: string, by: SignedIn, env: { id: string; pathValue: string }, action: PrivacyAction, userId: string, suppress: boolean) {
    const work = (async () => {
      await db.privacyRequest.update({ where: { id }, data: { status: 'running', startedAt: new Date() } });
      try {
        const result = await perform(id, by, env, action, userId, suppress);
        await finish(id, { status: 'succeeded', result });
      } catch (err) {
        log.warn({ err: (err as Error).message, request: id, action }, 'privacy request failed');
        await finish(id, { status: 'failed', error: (err as Error).message.split('\n').at(-1) || 'failed' });
      }
    })().catch((err: Error) => log.error({ err: err.message, request: id }, 'privacy request not recorded'));
    running.add(work);
    active.add(id);
    void work.finally(() => {
      running.delete(work);
      active.delete(id);
    });
  }

  return {
    async submit(by, env, action, userId, options) {
      const pool = poolOf(db);
      const userHash = auditHashHex(await readAuditSecret(pool), userHashOf(userId));
      const row = await db.privacyRequest.create({ data: { environmentId: env.id, action, operator: by.name, userHash } });
      await auditChange(db, by.name, `privacy.${action}`, env.pathValue, {
        request: row.id,
        userHash,
        ...(action === 'forget' ? { suppress: options.suppress } : {}),
      });
      run(row.id, by, env, action, userId, options.suppress);
      return view(row, env.pathValue);
    },
    async get(id) {
      if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id)) return null;
      const row = await db.privacyRequest.findUnique({ where: { id } });
      if (!row) return null;
      const env = await db.environment.findUnique({ where: { id: row.environmentId }, select: { pathValue: true } });
      return view(row, env?.pathValue ?? row.environmentId);
    },
    async exportFile(id) {
      return exports.get(id)?.file ?? null;
    },
    async close() {
      const bound = new Promise<void>((resolve) => setTimeout(resolve, 10_000).unref());
      await Promise.race([Promise.allSettled([...running]), bound]);
      // Still running: the process stops under it. Each operation can be run again as it is.
      if (active.size)
        await db.privacyRequest
          .updateMany({
            where: { id: { in: [...active] }, status: { in: ['pending', 'running'] } },
            data: { status: 'failed', finishedAt: new Date(), error: 'the dashboard stopped while it ran: submit it again' },
          })
          .catch(() => {});
      for (const id of [...exports.keys()]) await forgetExport(id);
      if (folder) await rm(await folder, { recursive: true, force: true });
    },
  };
}

/**
 * The file of export request `id`'s document, for an admin's download (the admin API's and the
 * console's): MissingError when there is no such export or its document is no longer kept,
 * OperatorError while it has not succeeded.
 */
export async function exportDocument(requests: PrivacyRequests, id: string): Promise<string> {
  const request = await requests.get(id);
  if (!request || request.action !== 'export') throw new MissingError(`no export request ${id}`);
  if (request.status !== 'succeeded') throw new OperatorError(`the export is ${request.status}`);
  const file = await requests.exportFile(id);
  if (!file) throw new MissingError(`the document of export ${id} is no longer kept (or another dashboard process made it)`);
  return file;
}
