import type { Decision } from '../../identify/consent.ts';
import type { ConsentDecisionInput } from '../../identify/validation.ts';

/** A validated consent decision: an email marketing grant with the spec's defaults, changed by `over`. */
export const decisionInput = (over: Partial<ConsentDecisionInput> = {}): ConsentDecisionInput => ({
  channel: 'email',
  status: 'granted',
  purpose: 'marketing',
  basis: null,
  source: 'api',
  consentedAt: null,
  proofRef: null,
  expiresAt: null,
  ...over,
});

/** A stored decision: an email marketing grant decided at 0 with the spec's defaults, changed by `over`. */
export const storedDecisionOf = (over: Partial<Decision> = {}): Decision => ({
  channel: 'email',
  purpose: 'marketing',
  status: 'granted',
  basis: null,
  source: 'api',
  proofRef: null,
  decidedAt: 0,
  expiresAt: null,
  ...over,
});
