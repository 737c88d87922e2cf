// How far ahead of the service clock a caller's time may be (the spec's 5 minutes): an Identify
// `timestamp` beyond it is refused; a consent `consentedAt` beyond it is replaced by the call's time.
export const MAX_AHEAD_MS = 5 * 60_000;

export const TOO_FAR_AHEAD_MESSAGE = 'timestamp cannot be more than 5 minutes in the future';

export const isTooFarAhead = (ms: number, now: number): boolean => ms > now + MAX_AHEAD_MS;
