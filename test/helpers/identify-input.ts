import { callDigest } from '../../identify/call-digest.ts';
import { stringifyJson } from '../../platform/json-text.ts';
import { addressTraitsOf, type IdentifyInput } from '../../identify/validation.ts';

/** A validated Identify call's input: `traits` as a valid call carries them, nothing else set unless `extra` says. */
export function identifyInput(userId: string, traits: Record<string, unknown>, extra: Partial<Omit<IdentifyInput, 'callDigest'>> = {}): IdentifyInput {
  const input = {
    userId,
    traitsText: stringifyJson(traits),
    addressTraits: addressTraitsOf(traits),
    messageId: null,
    timestamp: null,
    timestampMs: null,
    consent: [],
    ...extra,
  };
  return { ...input, callDigest: callDigest(input.userId, input.timestampMs, JSON.parse(input.traitsText)) };
}
