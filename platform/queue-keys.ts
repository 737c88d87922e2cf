// Identifiers in Redis that need no BullMQ to compute: operator commands that read PostgreSQL
// or only publish on Redis use them without loading BullMQ (about 0.3 s of their start).
import { hash } from 'node:crypto';
import { toPgText } from './pg-text.ts';
import type { Config } from './config.ts';

/**
 * BullMQ rejects custom ids containing ':' and messageIds are free text, so the id is a
 * hash. Only dead-letter jobs have one (a rare path); events are identified by the table's key.
 */
export function jobIdFor(environmentId: string, messageId: string): string {
  // The escaped form is well-formed UTF-16, so two IDs differing only in an unpaired surrogate do not collide.
  return 'e' + hash('sha256', `${environmentId}\0${toPgText(messageId)}`, 'base64url').slice(0, 32);
}

/** Redis channels on which operator commands tell every gateway to drop cached key lookups, and gateways confirm. */
export function authCacheChannels(config: Pick<Config, 'queuePrefix'>): { invalidate: string; ack: string } {
  return { invalidate: `${config.queuePrefix}:auth-cache:invalidate`, ack: `${config.queuePrefix}:auth-cache:ack` };
}

/** Redis Cluster's hash slots: a key's slot is CRC16 of its hash tag (or the whole key) mod this. */
export const CLUSTER_SLOTS = 16384;

/** CRC16-XMODEM, the checksum Redis Cluster places keys by. */
function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/** The hash slot of `key`, as CLUSTER KEYSLOT computes it: only the first non-empty `{…}` counts. */
export function keySlot(key: string): number {
  const open = key.indexOf('{');
  if (open >= 0) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) key = key.slice(open + 1, close);
  }
  return crc16(Buffer.from(key, 'utf8')) % CLUSTER_SLOTS;
}

/**
 * The hash tags of the events queue's partitions. BullMQ keeps every key of a queue in the slot of
 * its name's hash tag, and hash tags do not spread by themselves (`{events:0..2}` put two of three
 * on one master of a three-master cluster). So partition i of n takes the first tag `events-<k>`
 * (k = 0, 1, …) whose slot lies in the middle half of the i-th of n equal parts of the slot
 * range: a cluster whose masters hold equal ranges (what `redis-cli --cluster create` and managed
 * services make) gets the partitions evenly, whatever the small differences in where its ranges
 * end. One partition keeps the name `events`.
 */
export function eventsPartitionTags(partitions: number): string[] {
  if (partitions === 1) return ['events'];
  const tags: string[] = [];
  const used = new Set<number>();
  for (let i = 0; i < partitions; i++) {
    const from = (i * CLUSTER_SLOTS) / partitions;
    const width = CLUSTER_SLOTS / partitions;
    const [lo, hi] = [from + width / 4, from + (3 * width) / 4];
    for (let k = 0; ; k++) {
      if (used.has(k)) continue;
      const slot = keySlot(`events-${k}`);
      if (slot >= lo && slot < hi) {
        used.add(k);
        tags.push(`events-${k}`);
        break;
      }
    }
  }
  return tags;
}

/** A queue's name: hash-tagged on a Redis Cluster, so that all of its keys share one slot (BullMQ's rule for clusters). */
export function queueName(base: string, config: Pick<Config, 'redisClusterNodes'>): string {
  return config.redisClusterNodes.length ? `{${base}}` : base;
}

/**
 * The names of the events queue's partitions (QUEUE_PARTITIONS). With one partition on one
 * Redis: `events`, as always. With several, each name is its hash tag (`{events-2}`), on one
 * Redis as on a cluster, so that moving to a cluster keeps the names.
 */
export function eventsQueueNames(config: Pick<Config, 'redisClusterNodes' | 'queuePartitions'>): string[] {
  const tags = eventsPartitionTags(config.queuePartitions);
  return config.queuePartitions === 1 ? [queueName(tags[0], config)] : tags.map((tag) => `{${tag}}`);
}

/** Redis channels on which suppress / unsuppress tell every gateway to read the suppressed user IDs again, and gateways confirm. */
export function suppressionChannels(config: Pick<Config, 'queuePrefix'>): { invalidate: string; ack: string } {
  return { invalidate: `${config.queuePrefix}:suppressions:invalidate`, ack: `${config.queuePrefix}:suppressions:ack` };
}

/** Redis channels on which an erasure asks every gateway to write what its live view recorders hold, and gateways confirm (gateway/live/flush-on-erasure.ts). */
export function liveFlushChannels(config: Pick<Config, 'queuePrefix'>): { invalidate: string; ack: string } {
  return { invalidate: `${config.queuePrefix}:live:flush`, ack: `${config.queuePrefix}:live:flush:ack` };
}
