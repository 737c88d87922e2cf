// The recorded history of a run: every operation's invocation and completion, every fault and
// clock move, and what the run observed of the gateways' replica use. Times are the real clock
// of the chaos runner (which runs without faketime), in ms since the epoch; `offsetMs` is the
// fake clock's offset in force, so a time as the service saw it is `time + offsetMs`.

/** The two organizations of a run: `a` joins profiles by email, `b` does not. */
export type Org = 'a' | 'b';

/** What came back: an HTTP answer, or why none came (timeout, reset, refused, closed). */
export type Outcome = { status: number; body: string } | { error: string };

export const answered = (o: Outcome): o is { status: number; body: string } => 'status' in o;
/** A connection refused: the request never left the client, so nothing of it was received. */
export const neverSent = (o: Outcome) => 'error' in o && o.error === 'refused';

interface OpBase {
  type: 'op';
  id: number;
  /** Which client issued it (its requests are sequential). */
  client: string;
  /** Which TCP connection carried it (client, gateway, socket number). */
  conn: string;
  org: Org;
  invokedAt: number;
  completedAt: number;
  offsetMs: number;
}

export interface TrackOp extends OpBase {
  kind: 'track';
  messageId: string;
  /** As sent (may be padded with spaces); null for an anonymous-only event. */
  userId: string | null;
  body: string;
  /** The op whose body this one sends again. */
  resendOf?: number;
  outcome: Outcome;
}

export interface IdentifyOp extends OpBase {
  kind: 'identify';
  messageId: string;
  userId: string;
  email: string | null;
  body: string;
  /** The op whose body this one sends again (expects duplicate: true). */
  retryOf?: number;
  /** The op whose messageId this one reuses with other traits (expects 409). */
  conflictOf?: number;
  outcome: Outcome;
}

export interface ProfileOp extends OpBase {
  kind: 'profile';
  userId: string;
  outcome: Outcome;
}

/** A request the contract refuses with a 4xx; its messageId and userId are used nowhere else. */
export interface BadOp extends OpBase {
  kind: 'bad';
  api: 'track' | 'identify';
  what: string;
  messageId: string | null;
  userId: string | null;
  body: string;
  outcome: Outcome;
}

/** One request of a pipelined write. */
export interface PipelinedRequest {
  /** valid: must be answered as usual; refused: Node's parser or Expect refuses it; behind: after a closing answer. */
  role: 'valid' | 'refused' | 'behind';
  api: 'track' | 'identify';
  messageId: string | null;
  userId: string | null;
}

export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Several requests in one TCP write; every answer on that connection, in order. */
export interface PipelineOp extends OpBase {
  kind: 'pipeline';
  variant: string;
  requests: PipelinedRequest[];
  answers: RawAnswer[];
  /** Bytes after the last whole answer (a torn answer). */
  trailing: string;
  closedByServer: boolean;
  /** A connection error before the server closed it (reset, refused). */
  error: string | null;
}

/** Why an operator command ran: a random operator op, the join scenario's erasure and its control, or the final exports. */
export type CommandPurpose = 'operator' | 'join-erasure' | 'control' | 'final-export' | 'setup';

export interface CommandOp extends OpBase {
  kind: 'forget' | 'suppress' | 'unsuppress' | 'export';
  userId: string;
  /** forget --suppress. */
  suppress: boolean;
  purpose: CommandPurpose;
  /** Another op started together with it (the join scenario's erasure and its control command). */
  pairedWith?: number;
  exitCode: number | null;
  stdout: string;
  stderr: string;
}

export type Op = TrackOp | IdentifyOp | ProfileOp | BadOp | PipelineOp | CommandOp;
export type OpKind = Op['kind'];

export type FaultKind = 'gateway-kill' | 'worker-kill' | 'redis-freeze' | 'redis-master-kill' | 'pg-freeze' | 'pg-restart' | 'replica-restart';

export interface Fault {
  type: 'fault';
  id: number;
  kind: FaultKind;
  target: string;
  startedAt: number;
  /** When everything it broke was back (the process restarted, the node thawed…). */
  endedAt: number;
  /** What did not heal as it should have (the run reports it; the checker allows for the fault). */
  note?: string;
}

export interface ClockMove {
  type: 'clock';
  id: number;
  fromOffsetMs: number;
  toOffsetMs: number;
  /** When the offset file was written. */
  at: number;
  /** When every process was seen on the new clock and retention had dropped what it drops (null: not seen within the bound). */
  settledAt: number | null;
  note?: string;
}

/** After the replica was restarted with the primary idle: each gateway's intake_read_replica_in_use, sampled. */
export interface ReplicaProbe {
  type: 'replica-probe';
  id: number;
  /** When the restarted replica accepted connections again. */
  replicaUpAt: number;
  /** The samples, in time order (null: the metric was absent or the gateway did not answer). */
  samples: { gateway: string; at: number; inUse: number | null }[];
  gateways: string[];
}

export type Entry = Op | Fault | ClockMove | ReplicaProbe;

export interface History {
  seed: number;
  startedAt: number;
  entries: Entry[];
}

export const ops = (h: History): Op[] => h.entries.filter((e): e is Op => e.type === 'op');
export const faults = (h: History): Fault[] => h.entries.filter((e): e is Fault => e.type === 'fault');
export const clockMoves = (h: History): ClockMove[] => h.entries.filter((e): e is ClockMove => e.type === 'clock');

/** Collects the entries of a run; ids are given in order of recording. */
export class Recorder {
  readonly history: History;
  private nextId = 1;
  private offsetMs = 0;

  constructor(seed: number) {
    this.history = { seed, startedAt: Date.now(), entries: [] };
  }

  /** The fake clock's offset in force (set by the clock mover, read when an op starts). */
  get offset(): number {
    return this.offsetMs;
  }

  setOffset(ms: number): void {
    this.offsetMs = ms;
  }

  id(): number {
    return this.nextId++;
  }

  add<E extends Entry>(entry: E): E {
    this.history.entries.push(entry);
    return entry;
  }
}
