// Every intake_* series a gateway and a worker export is in docs/observability.md's tables:
// the operator's one list of what to watch cannot miss what the processes expose.
import { readFileSync } from 'node:fs';
import test from 'ava';
import { request } from '../helpers/http.ts';
import { gatewayInProcess, workerInProcess } from '../helpers/processes.ts';
import { openHarness } from '../helpers/services.ts';

const documented = readFileSync('docs/observability.md', 'utf8');

/** The intake_* metric names of a scrape (its HELP lines). */
const namesOf = (text: string) => [...text.matchAll(/^# HELP (intake_\w+)/gm)].map((m) => m[1]);

test('every intake_* metric of a gateway and a worker is documented', async (t) => {
  const h = await openHarness();
  t.teardown(() => h.close());
  const gateway = await gatewayInProcess(h);
  t.teardown(() => gateway.close());
  const worker = await workerInProcess(h);
  t.teardown(() => worker.close());
  const scraped = [
    ...namesOf((await request(gateway.url, '/metrics', { method: 'GET' })).text),
    ...namesOf((await request(`http://127.0.0.1:${worker.metricsPort}`, '/metrics', { method: 'GET' })).text),
  ];
  t.true(scraped.length > 20, `${scraped.length} intake_* metrics scraped`);
  t.deepEqual(
    [...new Set(scraped)].filter((name) => !documented.includes(`\`${name}`)),
    [],
  );
});
