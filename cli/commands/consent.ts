import { isGrantedAt, normalizeAddress } from '../../identify/consent.ts';
import { findDecision } from '../../identify/decision-store.ts';
import { readArgs } from '../args.ts';
import { findEnvironment, type OperatorDeps } from '../../operations/operator.ts';

/**
 * consent get <org-slug> <email|sms> <address> [--purpose marketing|tracking] [--env <path-value>]:
 * the resolved decision for that address (email trimmed and lowercased), or null.
 * `granted` says whether a message may be sent now: granted and not lapsed.
 */
export async function consentGet(deps: OperatorDeps, argv: string[]) {
  const {
    positionals: [orgSlug, channel, rawAddress],
    values,
    usageError,
  } = readArgs(argv, 'consent get');
  if (channel !== 'email' && channel !== 'sms') throw usageError(`the channel must be email or sms, not ${JSON.stringify(channel)}`);
  const purpose = (values.purpose ?? 'marketing') as 'marketing' | 'tracking'; // one of the table's choices
  const address = normalizeAddress(channel, rawAddress);
  if (!address) throw usageError('the address is empty');
  const { env } = await findEnvironment(deps.db, orgSlug, values.env);
  const decision = await findDecision(deps.db, env.id, channel, purpose, address);
  if (!decision) return null;
  return { address, ...decision, granted: isGrantedAt(decision, Date.now()) };
}
