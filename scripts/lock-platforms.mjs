// npm run lock:platforms — after `npm install` rewrites package-lock.json, put back the
// entries of msgpackr-extract's platform builds that this registry mirror does not carry.
// `npm install` drops them, and `npm ci` then refuses a lock it calls out of sync. They are
// optional and OS/CPU-restricted, so npm ci on Linux x64 never fetches them.
import { readFileSync, writeFileSync } from 'node:fs';

const file = new URL('../package-lock.json', import.meta.url);
const lock = JSON.parse(readFileSync(file, 'utf8'));
const missing = { 'darwin-arm64': ['darwin', 'arm64'], 'darwin-x64': ['darwin', 'x64'], 'linux-arm': ['linux', 'arm'], 'win32-x64': ['win32', 'x64'] };
const parent = lock.packages['node_modules/msgpackr-extract'];
let added = 0;
for (const [name, [os, cpu]] of Object.entries(missing)) {
  const key = `node_modules/@msgpackr-extract/msgpackr-extract-${name}`;
  if (parent && !lock.packages[key]) {
    lock.packages[key] = { version: parent.version, cpu: [cpu], license: 'MIT', optional: true, os: [os] };
    added++;
  }
}
lock.packages = Object.fromEntries(Object.entries(lock.packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a < b ? -1 : 1)));
writeFileSync(file, JSON.stringify(lock, null, 2) + '\n');
console.log(`added ${added} platform entries`);
