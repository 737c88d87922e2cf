// The generator: several clients on keep-alive connections, each issuing the plan's mix of
// operations one after another (Track, resends, Identify, retries, conflicting reuses, Profiles
// reads, pipelined refusals, bad input), and one operator issuing `intake users …` commands.
// Every operation is recorded with its invocation, completion and outcome.
import { badBody, conflictingIdentify, pipelineWrite, poolIdentify, poolUser, POOL_SIZE, spelledUser, trackBody } from './bodies.ts';
import { runIntake } from './commands.ts';
import type { Gate } from './gate.ts';
import type { CommandOp, CommandPurpose, IdentifyOp, Org, TrackOp } from './history.ts';
import { answered, type Recorder } from './history.ts';
import { ClientConnections, REQUEST_TIMEOUT_MS, type Target } from './http-client.ts';
import type { GeneratedKind, OperatorKind, Plan } from './plan.ts';
import type { Rng } from './prng.ts';
import { parseAnswers, pipelined } from './raw-http.ts';
import type { System } from './system.ts';

/** What the clients share: earlier requests to send again, the users suppressed now. */
export interface Shared {
  tracks: Record<Org, TrackOp[]>;
  identifies: Record<Org, IdentifyOp[]>;
  suppressed: Record<Org, Set<string>>;
}

export function newShared(): Shared {
  return { tracks: { a: [], b: [] }, identifies: { a: [], b: [] }, suppressed: { a: new Set(), b: new Set() } };
}

export const targets = (sys: System): Target[] => sys.gateways.map((g) => ({ name: g.name, port: g.port }));

/** Sends one Track body and records it. */
export async function sendTrack(
  sys: System,
  rec: Recorder,
  conns: ClientConnections,
  target: Target,
  org: Org,
  request: { messageId: string; userId: string | null; body: string },
  resendOf?: number,
): Promise<TrackOp> {
  const sent = await sendRequest(sys, rec, conns, target, org, 'POST', `/api/track/${sys.orgs[org].slug}`, request.body);
  return rec.add({ ...sent, kind: 'track', messageId: request.messageId, userId: request.userId, body: request.body, resendOf });
}

/** Sends one Identify body and records it. */
export async function sendIdentify(
  sys: System,
  rec: Recorder,
  conns: ClientConnections,
  target: Target,
  org: Org,
  request: { messageId: string; userId: string; email: string | null; body: string },
  links: { retryOf?: number; conflictOf?: number } = {},
): Promise<IdentifyOp> {
  const sent = await sendRequest(sys, rec, conns, target, org, 'POST', `/api/identify/${sys.orgs[org].slug}`, request.body);
  return rec.add({ ...sent, kind: 'identify', messageId: request.messageId, userId: request.userId, email: request.email, body: request.body, ...links });
}

/**
 * Sends one request of an organization with its key: the fields every recorded request op holds
 * (who sent it, over which connection, when) and its outcome.
 */
async function sendRequest(
  sys: System,
  rec: Recorder,
  conns: ClientConnections,
  target: Target,
  org: Org,
  method: 'GET' | 'POST',
  path: string,
  body?: string,
) {
  const offsetMs = rec.offset;
  const sent = await conns.request(target, method, path, { 'x-api-key': sys.orgs[org].key }, body);
  return {
    type: 'op' as const,
    id: rec.id(),
    client: conns.client,
    conn: sent.conn,
    org,
    invokedAt: sent.invokedAt,
    completedAt: sent.completedAt,
    offsetMs,
    outcome: sent.outcome,
  };
}

/** Runs `intake users <kind> …` and records it. */
export async function runUsersCommand(
  sys: System,
  rec: Recorder,
  client: string,
  org: Org,
  kind: CommandOp['kind'],
  userId: string,
  options: { suppress?: boolean; purpose: CommandPurpose },
): Promise<CommandOp> {
  const offsetMs = rec.offset;
  const args = ['users', kind, sys.orgs[org].slug, userId, ...(options.suppress ? ['--suppress'] : []), ...(kind === 'export' ? [] : ['--by', 'chaos'])];
  const result = await runIntake(args, sys.env);
  return rec.add({
    type: 'op',
    id: rec.id(),
    kind,
    client,
    conn: 'cli',
    org,
    invokedAt: result.startedAt,
    completedAt: result.endedAt,
    offsetMs,
    userId,
    suppress: options.suppress ?? false,
    purpose: options.purpose,
    exitCode: result.exitCode,
    stdout: result.stdout,
    stderr: result.stderr,
  });
}

/**
 * `users forget` of `userId` in `org`, started together with a control command: `users forget`
 * of `nobody` in the other organization (the same start-up, connections and queue scans on the
 * same busy machine, nothing to remove, another environment's locks). The checker charges the
 * erasure only its time beyond the control's: on a loaded machine a command's start-up alone
 * takes seconds.
 */
export async function forgetBesideControl(
  sys: System,
  rec: Recorder,
  org: Org,
  userId: string,
  nobody: string,
  options: { suppress?: boolean; purpose: 'operator' | 'join-erasure' },
): Promise<CommandOp> {
  const [erase, control] = await Promise.all([
    runUsersCommand(sys, rec, 'operator', org, 'forget', userId, options),
    runUsersCommand(sys, rec, 'operator', org === 'a' ? 'b' : 'a', 'forget', nobody, { purpose: 'control' }),
  ]);
  erase.pairedWith = control.id;
  control.pairedWith = erase.id;
  return erase;
}

/** One client: its own connections, stream of randomness and messageIds. */
async function clientLoop(sys: System, rec: Recorder, plan: Plan, shared: Shared, gate: Gate, rng: Rng, index: number, until: () => boolean) {
  const name = `c${index}`;
  const conns = new ClientConnections(name);
  const tag = `${plan.seed}-${name}`;
  let n = 0;
  try {
    while (!until()) {
      await gate.through(async () => {
        const kind = rng.weighted(plan.weights) as GeneratedKind;
        const org: Org = rng.chance(plan.orgBShare) ? 'b' : 'a';
        const target = rng.pick(targets(sys));
        n++;
        await issue(kind);

        async function issue(k: GeneratedKind): Promise<void> {
          switch (k) {
            case 'track': {
              // Organization b sometimes reuses a messageId of a: one environment's IDs never collide with another's.
              const reuse = org === 'b' && shared.tracks.a.length && rng.chance(0.2) ? rng.pick(shared.tracks.a).messageId : null;
              const request = trackBody(rng, reuse ?? `t${tag}-${n}`, sys.clock.now(), n);
              shared.tracks[org].push(await sendTrack(sys, rec, conns, target, org, request));
              return;
            }
            case 'track-resend': {
              if (!shared.tracks[org].length) return issue('track');
              const original = rng.pick(shared.tracks[org]);
              await sendTrack(sys, rec, conns, target, org, original, original.id);
              return;
            }
            case 'identify': {
              shared.identifies[org].push(await sendIdentify(sys, rec, conns, target, org, poolIdentify(rng, `i${tag}-${n}`, sys.clock.now(), n)));
              return;
            }
            case 'identify-retry': {
              if (!shared.identifies[org].length) return issue('identify');
              const original = rng.pick(shared.identifies[org]);
              await sendIdentify(sys, rec, conns, target, org, original, { retryOf: original.id });
              return;
            }
            case 'identify-conflict': {
              const applied = shared.identifies[org].filter((op) => answered(op.outcome) && op.outcome.status === 200);
              if (!applied.length) return issue('identify');
              const original = rng.pick(applied);
              await sendIdentify(sys, rec, conns, target, org, conflictingIdentify(original, n), { conflictOf: original.id });
              return;
            }
            case 'profile': {
              const userId = spelledUser(rng);
              const path = `/api/profiles/${sys.orgs[org].slug}/${encodeURIComponent(userId)}`;
              rec.add({ ...(await sendRequest(sys, rec, conns, target, org, 'GET', path)), kind: 'profile', userId });
              return;
            }
            case 'bad': {
              const bad = badBody(rng, `bad${tag}-${n}`, `bu${tag}-${n}`, sys.clock.now());
              const sent = await sendRequest(sys, rec, conns, target, org, 'POST', `/api/${bad.api}/${sys.orgs[org].slug}`, bad.body);
              rec.add({ ...sent, kind: 'bad', ...bad });
              return;
            }
            case 'pipeline': {
              const write = pipelineWrite(rng, sys.orgs[org].slug, sys.orgs[org].key, sys.clock.now(), (i) => ({
                messageId: `pl${tag}-${n}-${i}`,
                userId: `pu${tag}-${n}-${i}`,
              }));
              const offsetMs = rec.offset;
              const invokedAt = Date.now();
              const exchange = await pipelined(target.port, write.bytes, REQUEST_TIMEOUT_MS);
              const { answers, trailing } = parseAnswers(exchange.received);
              rec.add({
                type: 'op',
                id: rec.id(),
                kind: 'pipeline',
                client: name,
                conn: `${target.name}/raw-${n}`,
                org,
                invokedAt,
                completedAt: Date.now(),
                offsetMs,
                variant: write.variant,
                requests: write.parts,
                answers,
                trailing,
                closedByServer: exchange.closedByServer,
                error: exchange.error,
              });
              return;
            }
          }
        }
      });
      await sleep(rng.between(plan.thinkMs[0], plan.thinkMs[1]));
    }
  } finally {
    conns.close();
  }
}

/** The operator: one `intake users …` command at a time, a few seconds apart. */
async function operatorLoop(sys: System, rec: Recorder, plan: Plan, shared: Shared, gate: Gate, rng: Rng, until: () => boolean) {
  while (!until()) {
    await sleep(rng.between(plan.operatorEveryMs[0], plan.operatorEveryMs[1]));
    if (until()) break;
    await gate.through(async () => {
      let kind = rng.weighted(plan.operatorWeights) as OperatorKind;
      const org: Org = rng.chance(0.85) ? 'a' : 'b';
      if (kind === 'unsuppress' && !shared.suppressed[org].size) kind = 'export';
      const someone = () => (rng.chance(0.2) ? spelledUser(rng) : poolUser(rng.int(POOL_SIZE)));
      switch (kind) {
        case 'forget':
        case 'forget-suppress': {
          const suppress = kind === 'forget-suppress';
          const userId = someone();
          await forgetBesideControl(sys, rec, org, userId, `${plan.seed}-operator-nobody`, { suppress, purpose: 'operator' });
          if (suppress) shared.suppressed[org].add(userId.trim());
          return;
        }
        case 'suppress': {
          const userId = someone();
          await runUsersCommand(sys, rec, 'operator', org, 'suppress', userId, { purpose: 'operator' });
          shared.suppressed[org].add(userId.trim());
          return;
        }
        case 'unsuppress': {
          const userId = rng.pick([...shared.suppressed[org]].sort());
          const op = await runUsersCommand(sys, rec, 'operator', org, 'unsuppress', userId, { purpose: 'operator' });
          if (op.exitCode === 0) shared.suppressed[org].delete(userId);
          return;
        }
        case 'export':
          await runUsersCommand(sys, rec, 'operator', org, 'export', someone(), { purpose: 'operator' });
          return;
      }
    });
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Runs the clients and the operator until `until()` says stop; resolves when all have stopped. */
export async function runGenerator(sys: System, rec: Recorder, plan: Plan, shared: Shared, gate: Gate, rng: Rng, until: () => boolean): Promise<void> {
  await Promise.all([
    ...Array.from({ length: plan.clients }, (_, i) => clientLoop(sys, rec, plan, shared, gate, rng.fork(`client-${i}`), i, until)),
    operatorLoop(sys, rec, plan, shared, gate, rng.fork('operator'), until),
  ]);
}
