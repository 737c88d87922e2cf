// Lets the nemesis quiesce the clients: `pause` stops new requests and waits until none is in
// flight (then the clock can move, or the primary can be idle), `resume` lets them go on.

export class Gate {
  private held: Promise<void> | null = null;
  private release: (() => void) | null = null;
  private inFlight = 0;
  private idle: (() => void) | null = null;

  /** Waits while paused, then counts a request in flight until `leave`. */
  async enter(): Promise<void> {
    while (this.held) await this.held;
    this.inFlight++;
  }

  leave(): void {
    this.inFlight--;
    if (this.inFlight === 0) this.idle?.();
  }

  /** Runs `work` as one request in flight. */
  async through<T>(work: () => Promise<T>): Promise<T> {
    await this.enter();
    try {
      return await work();
    } finally {
      this.leave();
    }
  }

  async pause(): Promise<void> {
    if (!this.held) this.held = new Promise((resolve) => (this.release = resolve));
    if (this.inFlight > 0) await new Promise<void>((resolve) => (this.idle = resolve));
    this.idle = null;
  }

  resume(): void {
    const release = this.release;
    this.held = null;
    this.release = null;
    release?.();
  }
}
