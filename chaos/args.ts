// The command line of `npm run chaos`: one seed for some minutes, or the fixed CI seeds.
import { CI_MINUTES, CI_SEEDS } from './plan.ts';

export interface ChaosArgs {
  seeds: number[];
  minutes: number;
  /** Keep every seed's logs, history and final state, violations or not. */
  keep: boolean;
}

/** A single run's default: long enough for a few steps. */
const DEFAULT_MINUTES = 1;

export function parseChaosArgs(argv: string[]): ChaosArgs | { error: string } {
  let seed: number | undefined;
  let minutes: number | undefined;
  let ci = false;
  let keep = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value`);
      return v;
    };
    try {
      if (arg === '--ci') ci = true;
      else if (arg === '--keep') keep = true;
      else if (arg === '--seed') {
        const v = value();
        if (!/^\d{1,9}$/.test(v)) return { error: `--seed must be a whole number, not ${JSON.stringify(v)}` };
        seed = Number(v);
      } else if (arg === '--minutes') {
        const v = value();
        if (!/^\d+(\.\d+)?$/.test(v) || Number(v) <= 0 || Number(v) > 600)
          return { error: `--minutes must be a number of minutes above 0, at most 600, not ${JSON.stringify(v)}` };
        minutes = Number(v);
      } else return { error: `unknown argument ${JSON.stringify(arg)}` };
    } catch (err) {
      return { error: (err as Error).message };
    }
  }
  if (ci && (seed !== undefined || minutes !== undefined)) return { error: '--ci runs its own seeds and length: give it alone' };
  if (ci) return { seeds: [...CI_SEEDS], minutes: CI_MINUTES, keep };
  return { seeds: [seed ?? Math.floor(Math.random() * 1_000_000)], minutes: minutes ?? DEFAULT_MINUTES, keep };
}
