// What a call can fail with. Every error says how many attempts were made, so a caller can
// tell "the service refused this" (one attempt) from "the service stayed unavailable".

/** Issue of an Identify 400 (`Invalid Identify call`): zod's shape. */
export interface Issue {
  code: string;
  path: (string | number)[];
  message: string;
  expected?: string;
  received?: string;
  [detail: string]: unknown;
}

export class IntakeError extends Error {
  override name = 'IntakeError';
  constructor(
    message: string,
    /** Attempts made, retries included. */
    readonly attempts: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The service answered with an error status. */
export class IntakeApiError extends IntakeError {
  override name = 'IntakeApiError';
  constructor(
    readonly status: number,
    /** The service's `error` text (`404 Not Found` for the plain-text 404). */
    readonly error: string,
    /** Identify validation problems (400 `Invalid Identify call`), else undefined. */
    readonly issues: Issue[] | undefined,
    /** The parsed JSON body, or the text when it was not JSON. */
    readonly body: unknown,
    attempts: number,
  ) {
    super(`${status} ${error}`, attempts);
  }

  /** Whether the contract calls this status temporary (429, 5xx): then the retries ran out. */
  get temporary(): boolean {
    return isTemporaryStatus(this.status);
  }
}

/** No answer: the connection failed or dropped, or an attempt ran past its timeout, on every attempt. */
export class IntakeConnectionError extends IntakeError {
  override name = 'IntakeConnectionError';
  constructor(
    message: string,
    /** `ECONNRESET`, `ECONNREFUSED`…, or `TIMEOUT` for an attempt that ran past its timeout. */
    readonly code: string,
    attempts: number,
    options?: { cause?: unknown },
  ) {
    super(message, attempts, options);
  }
}

/** The contract's temporary statuses: 429 and every 5xx. Everything else fails the same way when resent. */
export function isTemporaryStatus(status: number): boolean {
  return status === 429 || (status >= 500 && status <= 599);
}
