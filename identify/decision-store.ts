// The consent decision stored for an address: what `intake consent get` shows and what the
// journey engine reads before a consent-gated send.
import type { Tx } from '../platform/db.ts';
import { hashStored } from '../platform/identity-hash.ts';
import { toPgText } from '../platform/pg-text.ts';
import { storedDecision, type Decision } from './consent.ts';

/** The stored decision for an address (normalized) and channel/purpose, or null. */
export async function findDecision(
  client: Pick<Tx, 'consentDecision'>,
  environmentId: string,
  channel: Decision['channel'],
  purpose: Decision['purpose'],
  address: string,
): Promise<(Decision & { updatedAt: number }) | null> {
  const addressKey = toPgText(address);
  const row = await client.consentDecision.findUnique({
    where: { environmentId_channel_purpose_addressHash: { environmentId, channel, purpose, addressHash: hashStored(addressKey) } },
  });
  return row && row.address === addressKey ? { ...storedDecision(row), updatedAt: row.updatedAt.getTime() } : null;
}
