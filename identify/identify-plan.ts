// Identify's rules applied to a batch of calls, in memory and in arrival order: the one rule
// path for every call (traits only, consent, join by email, any organization). Pure: the
// store (identify-batch.ts) reads and locks what the batch touches into a Snapshot, this
// module decides every answer and every row to write, and the store writes them set-based.
// Applying a batch here gives what applying its calls one after the other would.
import { randomUUID } from 'node:crypto';
import * as consent from './consent.ts';
import type { Channel, Decision } from './consent.ts';
import { repeatVerdict } from './call-digest.ts';
import { joinableEmail, joinTarget } from './email.ts';
import { FEATURE, hasFeature } from '../environments/features.ts';
import { storedHashHex } from '../platform/identity-hash.ts';
import { toPgText } from '../platform/pg-text.ts';
import { profileFieldsChanged, SERVICE_EVENTS, subscriptionChanged, type EventSubject } from '../events/service-events.ts';
import { stringifyJson } from '../platform/json-text.ts';
import { joinTraits, mergeTraits, type TraitState } from './trait-merge.ts';
import { userKeyOf } from '../profiles/person.ts';
import type { IdentifyInput } from './validation.ts';

export type Verdict = 'applied' | 'duplicate' | 'conflict';

/** One accepted Identify call, with the values its rows are keyed by. */
export interface IdentifyCall {
  envId: string;
  /** The organization has the attribute-trigger feature: its trait changes go to the outbox (they can start journeys). */
  attributeTrigger: boolean;
  input: IdentifyInput;
  /** As sent, or generated when omitted. */
  messageId: string;
  /** The call's time: its timestamp, else its receipt time. */
  callTime: number;
  /** When the gateway received it: an erasure drops what was received up to its time (privacy/rules.ts). */
  receivedAt: number;
  /** userId and messageId as their columns store them (pg-text.ts). */
  userKey: string;
  messageKey: string;
  /** The user key's SHA-256 as hex (identity-hash.ts storedHashHex): hashed once, read by every statement that names the user. */
  userHashHex: string;
  /** The email the call joins profiles on: traits.email when it may join (email.ts) and the organization has the join-by-email feature. */
  joinEmail: string | null;
}

/** The call as the batch weighs it; a messageId is generated when the caller sent none. */
export function toIdentifyCall(env: { id: string; features: readonly string[] }, input: IdentifyInput, receivedAt: number): IdentifyCall {
  const messageId = input.messageId ?? randomUUID();
  const userKey = userKeyOf(input.userId);
  return {
    envId: env.id,
    attributeTrigger: hasFeature(env.features, FEATURE.attributeTrigger),
    input,
    messageId,
    callTime: input.timestampMs ?? receivedAt,
    receivedAt,
    userKey,
    userHashHex: storedHashHex(userKey),
    messageKey: toPgText(messageId),
    joinEmail: hasFeature(env.features, FEATURE.joinByEmail) ? joinableEmail(input.addressTraits.email) : null,
  };
}

export interface StoredClaim {
  channel: Channel;
  value: string;
  at: number;
  /** Arrival order (the row id; later claims of a batch after every stored one). */
  order: number;
}

/** Texts and plain values only: a snapshot crosses to a JSON pool thread (platform/json-pool.ts) when large. */
export interface StoredProfile {
  id: string;
  envId: string;
  /** The stored traits and their times, as JSON text (parsed by the planner). */
  fields: string;
  times: string;
  updatedAt: number;
  email: string | null;
  createdAt: number;
  /** Address history, loaded only for batches with consent decisions. */
  claims: StoredClaim[] | null;
  /** The latest claim of each channel's history (always loaded): an unchanged address is not claimed again. */
  latest: LatestClaims;
}

export type LatestClaims = Partial<Record<Channel, StoredClaim>>;

/** What the store read (and locked) for a batch. */
export interface Snapshot {
  /** userRef(call) → profile id, for the batch's users that have a profile. */
  users: Map<string, string>;
  /** The profiles of those users and, for joining, every profile holding a joinable email of the batch. */
  profiles: Map<string, StoredProfile>;
  /** messageRef(call) → the digest of the earlier call recorded under that messageId (call-digest.ts). */
  priors: Map<string, string>;
  /** consentRef → the stored decision (absent: none). Null before they were read (first pass). */
  decisions: Map<string, Decision> | null;
}

export interface DecisionRow {
  envId: string;
  decision: Decision;
  address: string;
}

export interface Plan {
  verdicts: Verdict[];
  /** Per call, the names of the traits it changed (none for a duplicate or a conflict): what the dashboard's live view shows. */
  changed: (readonly string[])[];
  /** Profiles to insert (isNew) or update, in their final state (as a cache keeps them: without their address history). */
  profiles: (StoredProfile & { claims: null; isNew: boolean })[];
  /** Stored profiles joined into another: their user IDs and claims move to `to`, then they are deleted. */
  moved: { from: string; to: string }[];
  users: { envId: string; userKey: string; profileId: string }[];
  /** Every user of the batch (userRef) and the profile it ends on: what a cache of profiles learns (profile-cache.ts). */
  userProfiles: [userRef: string, profileId: string][];
  claims: { profileId: string; channel: Channel; value: string; at: number }[];
  decisions: DecisionRow[];
  /** Service events, each with the key of the user whose call caused it: an erasure removes them by it. */
  outbox: { envId: string; userKey: string; kind: string; payload: string }[];
  /** Every (address, channel/purpose) the batch's decisions apply to: the store locks and reads these. */
  consentKeys: Map<string, { envId: string; channel: Channel; purpose: Decision['purpose']; address: string }>;
}

const NO_CHANGES: readonly string[] = Object.freeze([]);

export const userRef = (c: Pick<IdentifyCall, 'envId' | 'userKey'>) => `${c.envId}:${c.userKey}`;
export const messageRef = (c: Pick<IdentifyCall, 'envId' | 'messageKey'>) => `${c.envId}:${c.messageKey}`;
export const consentRef = (envId: string, channel: string, purpose: string, address: string) => `${envId}:${channel}:${purpose}:${toPgText(address)}`;

/** The join candidates' and the profile read: a profile the store expected is gone (joined away meanwhile). */
export class SnapshotChanged extends Error {
  override name = 'SnapshotChanged';
}

interface Work extends Omit<StoredProfile, 'fields' | 'times' | 'updatedAt'> {
  state: TraitState;
  isNew: boolean;
  dirty: boolean;
  into: string | null;
}

const NEW_CLAIM_ORDER = 2 ** 52;

/** A stored profile as the planner changes it (field by field: object rest and spread were most of planBatch's own time). */
function toWork(p: StoredProfile, isNew = false): Work {
  return {
    id: p.id,
    envId: p.envId,
    state: { fields: JSON.parse(p.fields) as Record<string, unknown>, times: JSON.parse(p.times) as Record<string, number>, updatedAt: p.updatedAt },
    email: p.email,
    createdAt: p.createdAt,
    claims: p.claims && [...p.claims],
    latest: { ...p.latest },
    isNew,
    dirty: isNew,
    into: null,
  };
}

/** A plan with nothing in it yet (the planner's start; tests build plans from it). */
export function emptyPlan(): Plan {
  return { verdicts: [], changed: [], profiles: [], moved: [], users: [], userProfiles: [], claims: [], decisions: [], outbox: [], consentKeys: new Map() };
}

/** What a batch's plan works on while its calls are applied in turn. */
interface BatchState {
  readonly snap: Snapshot;
  readonly now: number;
  readonly newId: () => string;
  readonly historyFrom: number | null;
  readonly plan: Plan;
  /** The snapshot's profiles as the calls change them, and the batch's new ones. */
  readonly profiles: Map<string, Work>;
  /** userRef → profile id, the snapshot's and the batch's new users. */
  readonly users: Map<string, string>;
  /** The users this batch gives a profile (the rows of profile_users to insert). */
  readonly newUsers: Map<string, { envId: string; userKey: string; profileId: string }>;
  /** messageRef → call digest of the batch's calls applied so far. */
  readonly seen: Map<string, string>;
  /** consentRef → the decision in force: the snapshot's, then the batch's. */
  readonly decisions: Map<string, Decision>;
  readonly decisionWrites: Map<string, DecisionRow>;
  /** The arrival order of the next address claim. */
  claimOrder: number;
}

/** `historyFrom`: the earliest decision time the address history answers for (consent.ts addressHistoryFrom; null: any). */
export function planBatch(calls: IdentifyCall[], snap: Snapshot, now: number, newId: () => string, historyFrom: number | null = null): Plan {
  const state = batchState(snap, now, newId, historyFrom);
  for (const call of calls) {
    const repeat = repeatOf(state, call);
    if (repeat !== null) {
      state.plan.verdicts.push(repeat);
      state.plan.changed.push(NO_CHANGES);
      continue;
    }
    const profile = profileFor(state, call);
    const changed = mergeCall(profile, call);
    claimAddresses(state, profile, call);
    const subject = { userId: call.input.userId, profileId: profile.id, messageId: call.messageId };
    const fieldsEvent = profileFieldsChanged(call.attributeTrigger, subject, call.callTime, changed, profile.state.fields);
    if (fieldsEvent) state.plan.outbox.push({ envId: call.envId, userKey: call.userKey, kind: SERVICE_EVENTS.profileFieldsChanged, payload: fieldsEvent });
    decideConsent(state, profile, call, subject);
    state.plan.verdicts.push('applied');
    state.plan.changed.push(changed);
  }
  return finishPlan(state);
}

function batchState(snap: Snapshot, now: number, newId: () => string, historyFrom: number | null): BatchState {
  const profiles = new Map<string, Work>();
  for (const p of snap.profiles.values()) profiles.set(p.id, toWork(p));
  // New claims come after every claim of the snapshot (a cached one may hold earlier batches' new claims).
  let claimOrder = NEW_CLAIM_ORDER;
  for (const p of snap.profiles.values()) for (const c of Object.values(p.latest)) claimOrder = Math.max(claimOrder, c.order + 1);
  return {
    snap,
    now,
    newId,
    historyFrom,
    plan: emptyPlan(),
    profiles,
    users: new Map(snap.users),
    newUsers: new Map(),
    seen: new Map(),
    decisions: new Map(snap.decisions ?? []),
    decisionWrites: new Map(),
    claimOrder,
  };
}

/** Idempotency: the verdict of a messageId recorded before or earlier in the batch, or null for a call to apply (recorded then). */
function repeatOf(state: BatchState, call: IdentifyCall): Verdict | null {
  const mref = messageRef(call);
  const prior = state.seen.get(mref) ?? state.snap.priors.get(mref);
  if (prior !== undefined) return repeatVerdict(prior, call.input.callDigest);
  state.seen.set(mref, call.input.callDigest);
  return null;
}

/** The profile the call writes: its user's, the one it joins by email (its own joining it), or a new one. */
function profileFor(state: BatchState, call: IdentifyCall): Work {
  const uref = userRef(call);
  const ownId = state.users.get(uref);
  let profile: Work | null = ownId === undefined ? null : profileOf(state, ownId);
  if (call.joinEmail) {
    const other = joinTarget(liveProfiles(state.profiles), call.envId, call.joinEmail, profile?.id ?? null);
    if (other && !profile) {
      state.users.set(uref, other.id);
      state.newUsers.set(uref, { envId: call.envId, userKey: call.userKey, profileId: other.id });
      return other;
    }
    if (other && profile) {
      join(profile, other, state.users);
      return other;
    }
  }
  if (profile) return profile;
  profile = toWork(
    { id: state.newId(), envId: call.envId, fields: '{}', times: '{}', updatedAt: call.callTime, email: null, createdAt: state.now, claims: [], latest: {} },
    true,
  );
  state.profiles.set(profile.id, profile);
  state.users.set(uref, profile.id);
  state.newUsers.set(uref, { envId: call.envId, userKey: call.userKey, profileId: profile.id });
  return profile;
}

function profileOf(state: BatchState, id: string): Work {
  const p = state.profiles.get(id);
  if (!p || p.into !== null) throw new SnapshotChanged(`profile ${id} not in the batch's snapshot`);
  return p;
}

/** Merges the call's traits into the profile; returns the names of the traits it changed. */
function mergeCall(profile: Work, call: IdentifyCall): readonly string[] {
  // The traits are parsed here, once per call (validation kept them as text: json-pool.ts).
  const traits = JSON.parse(call.input.traitsText) as Record<string, unknown>;
  const merged = mergeTraits(profile.state, traits, call.callTime);
  profile.state = { fields: merged.fields, times: merged.times, updatedAt: merged.updatedAt };
  profile.email = joinableEmail(merged.fields.email);
  profile.dirty = true;
  return merged.changed;
}

/**
 * Every email/phone value a call sends is kept with the call's time, for "as of" lookups,
 * unless the history already answers it from that time on.
 */
function claimAddresses(state: BatchState, profile: Work, call: IdentifyCall): void {
  const { addressTraits } = call.input;
  for (const [channel, trait] of ADDRESS_TRAITS) {
    if (!Object.hasOwn(addressTraits, trait)) continue;
    const value = consent.normalizeAddress(channel, addressTraits[trait]) ?? '';
    if (consent.claimAddsNothing(profile.latest[channel], value, call.callTime)) continue;
    const claim = { channel, value, at: call.callTime, order: state.claimOrder++ };
    state.plan.claims.push({ profileId: profile.id, channel, value, at: call.callTime });
    profile.claims?.push(claim);
    profile.latest[channel] = consent.laterClaim(profile.latest[channel], claim);
  }
}

/** The call's consent decisions that supersede the one in force, each changing a subscription with its service event. */
function decideConsent(state: BatchState, profile: Work, call: IdentifyCall, subject: EventSubject): void {
  const { plan, decisions } = state;
  for (const c of consentCandidates(call, profile, state.now, state.historyFrom)) {
    const key = consentRef(call.envId, c.decision.channel, c.decision.purpose, c.address);
    plan.consentKeys.set(key, { envId: call.envId, channel: c.decision.channel, purpose: c.decision.purpose, address: c.address });
    const existing = decisions.get(key) ?? null;
    if (!consent.supersedes(c.decision, existing)) continue;
    decisions.set(key, c.decision);
    state.decisionWrites.set(key, { envId: call.envId, decision: c.decision, address: c.address });
    if (consent.changesSubscription(c.decision, existing))
      plan.outbox.push({
        envId: call.envId,
        userKey: call.userKey,
        kind: SERVICE_EVENTS.subscriptionChanged,
        payload: subscriptionChanged(subject, c.decision, c.address),
      });
  }
}

/** The rows to write: profiles in their final state, joined ones moved, and every reference to a joined profile followed to where it ended. */
function finishPlan(state: BatchState): Plan {
  const { plan, profiles } = state;
  const final = (id: string): string => {
    let p = profiles.get(id)!;
    while (p.into !== null) p = profiles.get(p.into)!;
    return p.id;
  };
  for (const p of profiles.values()) {
    if (p.into !== null) {
      if (!p.isNew) plan.moved.push({ from: p.id, to: final(p.id) });
    } else if (p.dirty) {
      const { fields, times, updatedAt } = p.state;
      plan.profiles.push({
        id: p.id,
        envId: p.envId,
        fields: stringifyJson(fields),
        times: JSON.stringify(times),
        updatedAt,
        email: p.email,
        createdAt: p.createdAt,
        claims: null,
        latest: p.latest,
        isNew: p.isNew,
      });
    }
  }
  for (const u of state.newUsers.values()) plan.users.push({ ...u, profileId: final(u.profileId) });
  for (const [ref, id] of state.users) plan.userProfiles.push([ref, final(id)]);
  for (const c of plan.claims) c.profileId = final(c.profileId);
  plan.decisions = [...state.decisionWrites.values()];
  return plan;
}

/** A batch's plan, or what the rules threw (by name: an Error's class does not cross threads). */
export type PlanOutcome = { kind: 'plan'; plan: Plan } | { kind: 'error'; name: string; message: string };

/** planBatch as platform/json-pool.ts runs it, inline or on a thread when the batch is large. */
export function planIdentifyBatch(calls: IdentifyCall[], snap: Snapshot, now: number, historyFrom: number | null = null): PlanOutcome {
  try {
    return { kind: 'plan', plan: planBatch(calls, snap, now, randomUUID, historyFrom) };
  } catch (err) {
    const e = err instanceof Error ? err : new Error(String(err));
    return { kind: 'error', name: e.name, message: e.message };
  }
}

const ADDRESS_TRAITS = [
  ['email', 'email'],
  ['sms', 'phone'],
] as const;

/** The profiles not joined away: the store read every one holding a joinable email of the batch, so these are all there are. */
function* liveProfiles(profiles: Map<string, Work>): Iterable<Work> {
  for (const p of profiles.values()) if (p.into === null) yield p;
}

/**
 * `own` joins `other`: each of its traits is applied at its own last-written time (the later
 * write wins), its user IDs and address history move over, and it is deleted.
 */
function join(own: Work, other: Work, users: Map<string, string>): void {
  const merged = joinTraits(other.state, own.state);
  other.state = { fields: merged.fields, times: merged.times, updatedAt: merged.updatedAt };
  other.email = joinableEmail(merged.fields.email);
  other.dirty = true;
  if (other.claims && own.claims) other.claims = [...other.claims, ...own.claims].sort((x, y) => x.order - y.order);
  for (const [channel] of ADDRESS_TRAITS) {
    const latest = consent.laterClaim(other.latest[channel], own.latest[channel]);
    if (latest) other.latest[channel] = latest;
  }
  for (const [ref, id] of users) if (id === own.id) users.set(ref, other.id);
  own.into = other.id;
}

/** The call's decisions with the address each applies to (skipped without one), in lock-key order. */
function consentCandidates(call: IdentifyCall, profile: Work, now: number, historyFrom: number | null): { decision: Decision; address: string }[] {
  const out: { decision: Decision; address: string; key: string }[] = [];
  for (const raw of call.input.consent) {
    const decision = consent.toDecision(raw, call.callTime, now);
    const { channel } = decision;
    const history = () => (profile.claims ?? []).filter((c) => c.channel === channel);
    const address = consent.addressFromTraits(channel, call.input.addressTraits) ?? consent.addressAsOf(channel, history(), decision.decidedAt, historyFrom);
    if (address) out.push({ decision, address, key: consentRef(call.envId, decision.channel, decision.purpose, address) });
  }
  return out.sort((x, y) => (x.key < y.key ? -1 : x.key > y.key ? 1 : 0));
}
