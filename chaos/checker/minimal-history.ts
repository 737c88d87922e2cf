// The smallest part of a history that shows a violation: its ops, the operator commands about
// the same people, and the faults, clock moves and replica probes around them, in time order.
import type { Entry, History, Op } from '../history.ts';
import { DAY_MS, type Violation } from './model.ts';

/** How far around the violation's ops the faults and clock moves that may explain it are looked for. */
const MARGIN_MS = 20_000;

export function minimalHistory(h: History, v: Violation): Entry[] {
  const byId = new Map(h.entries.map((e) => [e.id, e]));
  const own = v.opIds.map((id) => byId.get(id)).filter((e): e is Entry => e !== undefined);
  const people = new Set(own.flatMap((e) => (e.type === 'op' ? userIdsOf(e) : [])));
  const spans = own.map(span);
  const from = spans.length ? Math.min(...spans.map(([a]) => a)) - MARGIN_MS : -Infinity;
  const to = spans.length ? Math.max(...spans.map(([, b]) => b)) + MARGIN_MS : Infinity;
  const near = (e: Entry) => {
    const [a, b] = span(e);
    return a <= to && b >= from;
  };
  // An erasure of another user ID may have taken a call's data (a joined profile): those nearby count for calls.
  const calls = own.some((e) => e.type === 'op' && (e.kind === 'track' || e.kind === 'identify'));
  const picked = h.entries.filter((e) => {
    if (v.opIds.includes(e.id)) return true;
    if (e.type === 'op') return isCommand(e) && (userIdsOf(e).some((u) => people.has(u)) || (calls && near(e) && e.kind === 'forget'));
    if (e.type === 'replica-probe') return !spans.length || near(e);
    return near(e);
  });
  return picked.sort((a, b) => span(a)[0] - span(b)[0]);
}

const isCommand = (op: Op) => op.kind === 'forget' || op.kind === 'suppress' || op.kind === 'unsuppress' || op.kind === 'export';

function userIdsOf(op: Op): string[] {
  if (op.kind === 'pipeline') return op.requests.flatMap((r) => (r.userId ? [r.userId.trim()] : []));
  const out = 'userId' in op && typeof op.userId === 'string' ? [op.userId.trim()] : [];
  if (op.kind === 'forget' && op.exitCode === 0) {
    try {
      out.push(...((JSON.parse(op.stdout) as { joinedUserIds?: string[] }).joinedUserIds ?? []));
    } catch {
      // Not JSON: nothing more.
    }
  }
  return out;
}

function span(e: Entry): [number, number] {
  switch (e.type) {
    case 'op':
      return [e.invokedAt, e.completedAt];
    case 'fault':
      return [e.startedAt, e.endedAt];
    case 'clock':
      return [e.at, e.settledAt ?? e.at];
    case 'replica-probe':
      return [e.replicaUpAt, e.samples.length ? e.samples[e.samples.length - 1].at : e.replicaUpAt];
  }
}

const clip = (text: string, n = 160) => (text.length > n ? `${text.slice(0, n)}…` : text);

/** One line per entry: times in seconds since the run started, the fake clock's offset in days. */
export function renderEntry(h: History, e: Entry): string {
  const t = (ms: number) => `+${((ms - h.startedAt) / 1000).toFixed(3)}s`;
  const [a, b] = span(e);
  const when = a === b ? t(a) : `${t(a)}…${t(b)}`;
  switch (e.type) {
    case 'fault':
      return `${when} fault #${e.id} ${e.kind} ${e.target}${e.note ? ` (${e.note})` : ''}`;
    case 'clock':
      return `${when} clock ${e.fromOffsetMs / DAY_MS}d → ${e.toOffsetMs / DAY_MS}d${e.settledAt === null ? ' (never settled)' : ''}${e.note ? ` (${e.note})` : ''}`;
    case 'replica-probe':
      return `${when} replica up again; gateways' intake_read_replica_in_use sampled ${e.samples.length} times`;
    case 'op':
      return `${when} op#${e.id} ${e.client} ${e.conn} org ${e.org} clock +${e.offsetMs / DAY_MS}d ${describe(e)}`;
  }
}

function describe(op: Op): string {
  const outcome = (o: { status: number; body: string } | { error: string }) => ('status' in o ? `${o.status} ${clip(o.body, 120)}` : `no answer: ${o.error}`);
  switch (op.kind) {
    case 'track':
      return `track messageId=${op.messageId} userId=${JSON.stringify(op.userId)}${op.resendOf ? ` (resend of op#${op.resendOf})` : ''} → ${outcome(op.outcome)}`;
    case 'identify':
      return `identify messageId=${op.messageId} userId=${JSON.stringify(op.userId)} email=${op.email}${op.retryOf ? ` (retry of op#${op.retryOf})` : ''}${op.conflictOf ? ` (conflicting reuse of op#${op.conflictOf})` : ''} → ${outcome(op.outcome)}`;
    case 'profile':
      return `profile userId=${JSON.stringify(op.userId)} → ${outcome(op.outcome)}`;
    case 'bad':
      return `bad ${op.api} (${op.what}) messageId=${op.messageId} userId=${JSON.stringify(op.userId)} → ${outcome(op.outcome)}`;
    case 'pipeline':
      return `pipeline ${op.variant}: ${op.requests.map((r) => `${r.role} ${r.api} ${r.messageId ?? ''}`).join(' | ')} → ${op.answers.map((a) => `${a.status} ${clip(a.body, 60)}`).join(' | ') || 'no answer'}${op.closedByServer ? ', closed' : ''}${op.error ? `, ${op.error}` : ''}`;
    default:
      return `users ${op.kind}${op.suppress ? ' --suppress' : ''} ${JSON.stringify(op.userId)} (${op.purpose}) → exit ${op.exitCode} ${clip(op.exitCode === 0 ? op.stdout : op.stderr, 200).trim()}`;
  }
}
