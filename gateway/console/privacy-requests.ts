// The admin API's privacy requests (forget, suppress, unsuppress, export): each is a row of
// privacy_requests with an id and a status (pending → running → succeeded | failed) that an
// operator polls, as with Segment's Regulations API. The dashboard process that took a request
// runs it at once with the functions `intake users` runs (operations/people.ts,
// privacy/person-export.ts), so the erasure, the suppression, their audit records (naming the
// operator) and the gateways' notification are the command's own.
//
// A request survives the dashboard that took it (privacy-leases.ts): the process running it holds
// a lease on its row and renews it; once the lease ends (the process was killed) any dashboard
// claims the request and runs it again. Forget, suppress and unsuppress can be run again as they
// are (what was done is not done twice); an export is made again, by the process that runs it. A
// run that fails is tried again after a lease's time, up to PRIVACY_ATTEMPTS runs (a dashboard
// killed under it counts one); then, or at once for an operator's error (no such person), the
// request fails with the error. The raw user ID is kept in the row only while the request is open,
// so that another dashboard can run it, and cleared when it ends; the request names the person by
// the privacy audit's keyed hash. An export's document is written to a file only this process's
// user can read, served to admins, and deleted after EXPORT_KEEP_MS.
import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import { poolOf, type Db } from '../../platform/db.ts';
import type { Logger } from '../../platform/logger.ts';
import { forgetPerson, suppressPerson, unsuppressPerson } from '../../operations/people.ts';
import type { OperatorDeps } from '../../operations/operator.ts';
import { auditHashHex, readAuditSecret } from '../../privacy/audit.ts';
import { exportPerson } from '../../privacy/person-export.ts';
import { MissingError, OperatorError } from '../../operations/operator.ts';
import { userHashOf } from '../../profiles/person.ts';
import { auditChange } from './operators.ts';
import type { SignedIn } from './operators.ts';
import { claimExpired, endRun, PRIVACY_ATTEMPTS, renewLeases, startOwn, type ClaimedRequest } from './privacy-leases.ts';

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
  /** The last failed run's error (the request is tried again while it is open), or why it failed. */
  error: string | null;
  /** Runs started: more than one when a run failed or its dashboard stopped under it. */
  attempts: number;
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
  attempts: number;
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
    attempts: row.attempts,
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
  /** Claims the open requests whose lease ended (their dashboard stopped) and runs them. */
  resume(): Promise<void>;
  /** Waits (a bounded time) for the requests this process runs, then deletes the exports' files; a request still running is resumed by a dashboard once its lease ends. */
  close(): Promise<void>;
}

export function createPrivacyRequests(deps: { db: Db; operator: OperatorDeps; log: Logger }): PrivacyRequests {
  const { db, operator, log } = deps;
  /** Read when first needed: an API built only to list its routes has no configuration. */
  const leaseMs = () => operator.config.privacyRequestLeaseMs;
  /** This process's name on the leases it holds. */
  const owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const running = new Set<Promise<void>>();
  /** The requests this process runs now, by id. */
  const active = new Set<string>();
  const exports = new Map<string, { file: string; timer: NodeJS.Timeout }>();
  let folder: Promise<string> | undefined;
  let closed = false;

  // Renewed every third of the lease, from the first run on: a renewal may fail twice before the lease ends.
  let renewal: NodeJS.Timeout | undefined;
  const renewLater = () =>
    (renewal ??= setInterval(
      () => {
        if (!active.size) return;
        renewLeases(db, [...active], owner, leaseMs())
          .then((held) => {
            for (const id of active)
              if (!held.includes(id)) log.warn({ request: id }, 'privacy request: lease lost to another dashboard (its run is recorded there)');
          })
          .catch((err: Error) => log.warn({ err: err.message }, 'privacy requests: leases not renewed'));
      },
      Math.floor(leaseMs() / 3),
    ).unref());

  async function perform(id: string, by: string, env: { id: string; pathValue: string }, action: PrivacyAction, userId: string, suppress: boolean) {
    switch (action) {
      case 'forget': {
        // The user IDs joined to the person are personal data: only their number is kept.
        const { joinedUserIds, ...summary } = await forgetPerson(operator, env, userId, { suppress, operator: by });
        return { ...summary, joinedUserIds: joinedUserIds.length };
      }
      case 'suppress':
        return suppressPerson(operator, env, userId, by);
      case 'unsuppress':
        return unsuppressPerson(operator, env, userId, by);
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

  /** One run of a request this process claimed (its attempts count this run). */
  async function runClaimed(request: ClaimedRequest) {
    const { id } = request;
    const end = async (outcome: Parameters<typeof endRun>[4]) => {
      if (!(await endRun(db, id, owner, leaseMs(), outcome)))
        log.warn({ request: id, outcome: outcome.status }, 'privacy request: lease lost before its run ended');
    };
    if (request.userId === null) return end({ status: 'failed', error: 'the request keeps no user ID to run it again with: submit it again' });
    if (request.attempts > PRIVACY_ATTEMPTS) {
      const last = request.error ?? 'the dashboard running it stopped';
      return end({ status: 'failed', error: `gave up after ${PRIVACY_ATTEMPTS} runs; the last: ${last}` });
    }
    const action = request.action as PrivacyAction;
    try {
      const env = await db.environment.findUnique({ where: { id: request.environmentId }, select: { id: true, pathValue: true } });
      if (!env) throw new MissingError('its environment no longer exists');
      const result = await perform(id, request.operator, env, action, request.userId, request.suppress);
      await end({ status: 'succeeded', result: JSON.stringify(result) });
    } catch (err) {
      const error = (err as Error).message.split('\n').at(-1) || 'failed';
      // An operator's error (no such person, no environment) is the answer; anything else (PostgreSQL or Redis away, a timeout) may pass.
      const final = err instanceof OperatorError || request.attempts >= PRIVACY_ATTEMPTS;
      log.warn({ err: (err as Error).message, request: id, action, attempt: request.attempts, final }, 'privacy request failed');
      await end(final ? { status: 'failed', error } : { status: 'retry', error });
    }
  }

  function run(request: ClaimedRequest) {
    const { id } = request;
    renewLater();
    const work = runClaimed(request).catch((err: Error) => log.error({ err: err.message, request: id }, 'privacy request not recorded'));
    running.add(work);
    active.add(id);
    void work.finally(() => {
      running.delete(work);
      active.delete(id);
    });
  }

  let resuming: Promise<void> | undefined;
  async function resumeOnce() {
    // A few at a time: each holds a database connection while it runs.
    while (!closed && active.size < 4) {
      const claimed = await claimExpired(db, owner, leaseMs(), 4 - active.size);
      if (!claimed.length) return;
      for (const request of claimed) {
        log.info({ request: request.id, action: request.action, attempt: request.attempts }, 'privacy request resumed');
        run(request);
      }
    }
  }

  return {
    async submit(by, env, action, userId, options) {
      const pool = poolOf(db);
      const userHash = auditHashHex(await readAuditSecret(pool), userHashOf(userId));
      // Made with this process's lease, so that no other dashboard claims it before it starts here.
      const row = await db.privacyRequest.create({
        data: {
          environmentId: env.id,
          action,
          operator: by.name,
          userHash,
          userId,
          suppress: options.suppress,
          leaseOwner: owner,
          leaseUntil: new Date(Date.now() + leaseMs()),
        },
      });
      await auditChange(db, by.name, `privacy.${action}`, env.pathValue, {
        request: row.id,
        userHash,
        ...(action === 'forget' ? { suppress: options.suppress } : {}),
      });
      const started = await startOwn(db, row.id, owner, leaseMs());
      if (started) run(started);
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
    resume() {
      if (closed) return Promise.resolve();
      return (resuming ??= resumeOnce().finally(() => (resuming = undefined)));
    },
    async close() {
      closed = true;
      clearInterval(renewal);
      renewal = undefined;
      const bound = new Promise<void>((resolve) => setTimeout(resolve, 10_000).unref());
      await Promise.race([Promise.allSettled([...running]), bound]);
      // Still running: the process stops under it, its lease is no longer renewed, and a
      // dashboard runs it again once the lease ends (each operation can be run again as it is).
      if (active.size) log.warn({ requests: [...active] }, 'privacy requests still running: another dashboard resumes them once their leases end');
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
