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
