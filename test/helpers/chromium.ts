// Debian's chromium under playwright-core (no browser download), as the browser tests drive it:
// headless, a profile of its own in a temporary folder, nothing fetched in the background, so
// every request the pages make is one the test can see. close() also removes the profile.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type BrowserContextOptions } from 'playwright-core';

const CHROMIUM = process.env.TEST_CHROMIUM ?? '/usr/bin/chromium';

export interface Browser {
  context: BrowserContext;
  close(): Promise<void>;
}

export async function launchChromium(options: Pick<BrowserContextOptions, 'viewport' | 'httpCredentials'>): Promise<Browser> {
  const profileDir = mkdtempSync(path.join(tmpdir(), 'intake-chromium-'));
  const context = await chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    ...options,
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(profileDir, { recursive: true, force: true });
    },
  };
}
