#!/usr/bin/env node
// The `intake` command. It runs the compiled build (dist/, `npm run build`) when that was built
// from these very sources, and the TypeScript sources through tsx's loader otherwise, so a
// checkout works without a build step and an old build never runs after an edit (sources.js).
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ChoiceError, chooseCode } from './sources.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The entry module to import, or null after saying on stderr why there is none. */
async function entry() {
  let code;
  try {
    code = chooseCode(root);
  } catch (err) {
    if (!(err instanceof ChoiceError)) throw err;
    return refuse(err.message);
  }
  if (code.kind === 'sources') {
    // Imported only here: the build needs no TypeScript loader (and the image has none).
    const tsx = await import('tsx/esm/api').catch(() => null);
    if (!tsx) return refuse('running the TypeScript sources needs tsx (npm ci installs it); or build them: npm run build');
    tsx.register();
  }
  return pathToFileURL(code.entry).href;
}

function refuse(message) {
  process.stderr.write(`intake: ${message}\n`, () => process.exit(1));
  return null;
}

const url = await entry();
if (url) await import(url);
