import { decodeIdentify } from '../identify/validation.ts';
import { toIdentifyCall, planIdentifyBatch } from '../identify/identify-plan.ts';
import { ProfileCache } from '../identify/profile-cache.ts';
import { pgArrayLiteral } from '../platform/pg-array.ts';
import { randomUUID } from 'node:crypto';
const env = { id: randomUUID(), features: [] as string[] };
const ts = new Date().toISOString();
let n = 0;
const body = () => { n++; const u = n % 10000; return `{"type":"identify","messageId":"run-1-${n}","userId":"user-${u}","timestamp":"${ts}","traits":{"name":"User ${u}","plan":"p${n % 7}","visits":${n},"email":"user${u}@shop.io"}}`; };
const cache = new ProfileCache(64 * 1048576);
const B = 40, ITER = Number(process.env.ITER ?? 3000);
const t = { decode: 0n, call: 0n, snap: 0n, plan: 0n, remember: 0n };
const now = () => process.hrtime.bigint();
let calls = 0;
for (let i = 0; i < ITER; i++) {
  const batch = [];
  for (let j = 0; j < B; j++) {
    const raw = body(); const a = now();
    const d = decodeIdentify(raw, Date.now()); const b = now();
    if (d.kind !== 'ok') throw new Error('bad');
    batch.push(toIdentifyCall(env, d.input, Date.now())); const c = now();
    t.decode += b - a; t.call += c - b;
  }
  const a = now();
  const cached = cache.snapshotFor(batch);
  const snap = cached?.snapshot ?? { users: new Map(), profiles: new Map(), priors: new Map(), decisions: null };
  const b = now();
  const out = planIdentifyBatch(batch, snap, Date.now(), null);
  const c = now();
  if (out.kind !== 'plan') throw new Error(out.message);
  cache.remember(out.plan, String(1000 + i));
  const d = now();
  t.snap += b - a; t.plan += c - b; t.remember += d - c;
  calls += B;
  if (i === Math.floor(ITER / 3)) { for (const k of Object.keys(t)) (t as any)[k] = 0n; calls = 0; }
}
for (const [k, v] of Object.entries(t)) console.log(k.padEnd(10), (Number(v) / calls / 1000).toFixed(2), 'us/call');
