// The features an organization can have turned on (`intake org create --features`,
// `intake org features`): the one list the CLI, the Identify planner and the journey SQL read.
export const FEATURE = {
  /** Identify joins profiles that share an email address. */
  joinByEmail: 'join-by-email',
  /** Trait changes can start journeys (`attributeChanged` entries). */
  attributeTrigger: 'attribute-trigger',
} as const;

export type Feature = (typeof FEATURE)[keyof typeof FEATURE];

export const FEATURES: readonly Feature[] = Object.values(FEATURE);

export const hasFeature = (features: readonly string[], feature: Feature): boolean => features.includes(feature);
