// npm run docs:check on a copy of the project: in order as committed, and failing, with the
// file and line, on a broken link, a broken anchor, a generated section out of step with its
// source, and history wording. The phrases it bans are assembled here from parts, so that this
// file passes the check itself.
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { checkDocs, projectFiles } from '../../scripts/docs/check.mts';
import { findHistory } from '../../scripts/docs/history.mts';
import { anchorsOf, linksOf, repeatedHeadings, slug } from '../../scripts/docs/links.mts';

const run = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const RUN_WORD = ['ses', 'sion'].join('');
const NOT_KEPT = ['Tried, not', 'kept'].join(' ');

/** A copy of the project's files (what git tracks) in a folder of the test's own. */
function copyOfProject(): string {
  const copy = mkdtempSync(path.join(tmpdir(), 'intake-docs-'));
  for (const file of projectFiles(ROOT)) {
    mkdirSync(path.join(copy, path.dirname(file)), { recursive: true });
    cpSync(path.join(ROOT, file), path.join(copy, file));
  }
  return copy;
}

const copy = copyOfProject();
test.after.always(() => rmSync(copy, { recursive: true, force: true }));

/** Runs `check` on the copy with `file` changed by `edit`, then puts the file back. */
function withEdit(file: string, edit: (text: string) => string, check: (problems: string[]) => void) {
  const target = path.join(copy, file);
  const before = readFileSync(target, 'utf8');
  const after = edit(before);
  if (after === before) throw new Error(`the edit changed nothing in ${file}`);
  writeFileSync(target, after);
  try {
    check(checkDocs(copy));
  } finally {
    writeFileSync(target, before);
  }
}

const lineOf = (text: string, needle: string) => text.slice(0, text.indexOf(needle)).split('\n').length;

test.serial('the project as committed is in order', (t) => {
  t.deepEqual(checkDocs(copy), []);
});

test.serial('a link to a file that does not exist fails, naming the file and line', (t) => {
  const readme = readFileSync(path.join(copy, 'README.md'), 'utf8');
  const line = lineOf(readme, '](docs/operations.md)');
  withEdit(
    'README.md',
    (text) => text.replace('](docs/operations.md)', '](docs/operation.md)'),
    (problems) => {
      t.deepEqual(problems, [`README.md:${line}: link docs/operation.md: docs/operation.md does not exist`]);
    },
  );
});

test.serial('a link to a heading that does not exist fails; one that does passes', (t) => {
  withEdit(
    'docs/cli.md',
    (text) => text.replace('](operations.md#processes-and-signals)', '](operations.md#processes)'),
    (problems) => {
      t.is(problems.length, 1);
      t.regex(problems[0], /^docs\/cli\.md:\d+: link operations\.md#processes: docs\/operations\.md has no heading or anchor "processes"$/);
    },
  );
  withEdit(
    'docs/cli.md',
    (text) => `${text}\nSee [its health checks](operations.md#health-checks).\n`,
    (problems) => t.deepEqual(problems, []),
  );
});

test.serial('the configuration table or the CLI reference out of step with its source fails', (t) => {
  withEdit(
    'docs/configuration.md',
    (text) => text.replace('| `PORT` | `3000` |', '| `PORT` | `8080` |'),
    (problems) => {
      t.deepEqual(problems, ['docs/configuration.md: the configuration section differs from what platform/config.ts gives: run npm run docs:generate']);
    },
  );
  withEdit(
    'docs/cli.md',
    (text) => text.replace('usage: intake key revoke', 'usage: intake key delete'),
    (problems) => {
      t.deepEqual(problems, ['docs/cli.md: the cli section differs from what cli/usage.ts gives: run npm run docs:generate']);
    },
  );
  withEdit(
    'docs/cli.md',
    (text) => text.replace(/<!-- \/generated:cli -->/, ''),
    (problems) => {
      t.is(problems.length, 1);
      t.regex(problems[0], /^docs\/cli\.md: the cli section's markers are missing/);
    },
  );
});

test.serial('development history in a comment or a document fails', (t) => {
  withEdit(
    'gateway/app.ts',
    (text) => `// Measured in ${RUN_WORD} 12.\n${text}`,
    (problems) => {
      t.is(problems.length, 1);
      t.regex(problems[0], /^gateway\/app\.ts:1: a numbered entry of a work diary/);
    },
  );
  withEdit(
    'docs/performance.md',
    (text) => `${text}\n- **${NOT_KEPT}.** A second pool of threads.\n`,
    (problems) => {
      t.is(problems.length, 1);
      t.regex(problems[0], /^docs\/performance\.md:\d+: an attempt not kept/);
    },
  );
});

test('the history patterns: present tense passes, history fails, even wrapped onto the next line', (t) => {
  const found = (text: string) => findHistory(text).map((f) => f.line);
  const usedTo = ['used', 'to'].join(' ');
  t.deepEqual(found(`// The key is ${usedTo} sign the token.\n// It is then ${usedTo} look it up.`), []);
  t.deepEqual(found(`// A close in flight ${usedTo} end the process.`), [1]);
  t.deepEqual(found(`// The cache is\n// ${usedTo} hold profiles.`), [], 'the passive across a line break');
  t.deepEqual(found(`Measured first,\n- ${['tried,', 'not'].join(' ')}\n  kept: a thread of its own.`), [2], 'wrapped, with a list marker');
  t.deepEqual(found(`${RUN_WORD}s of work`), [1]);
  t.deepEqual(found(`// Found in the previous ${RUN_WORD}.\n// Measured during this ${RUN_WORD}.`), [1, 2]);
  t.deepEqual(
    found(`// A login ${RUN_WORD}: its ${RUN_WORD} cookie, ${RUN_WORD}sRevoked, Operator${RUN_WORD[0].toUpperCase()}${RUN_WORD.slice(1)}.`),
    [],
    "a login's",
  );
  t.deepEqual(found('the bench has run 10 ms; run 3 files at a time'), []);
  t.deepEqual(found(`| scenario | ${['run', '3'].join(' ')} | target |`), [1]);
  t.deepEqual(found(['previo', 'usly'].join('') + ' it did more'), [1]);
});

test("links and anchors: GitHub's slugs, fenced code and inline code ignored", (t) => {
  t.is(slug('One gateway on every core (`GATEWAY_PROCESSES`)'), 'one-gateway-on-every-core-gateway_processes');
  t.is(slug('Size measure (413)'), 'size-measure-413');
  t.is(slug('A 503 is "not confirmed", not "not stored"'), 'a-503-is-not-confirmed-not-not-stored');
  t.deepEqual([...anchorsOf('# A\n## B\n## B\n```\n# not a heading\n```\n<a id="c"></a>\n')], ['a', 'b', 'b-1', 'c']);
  t.deepEqual(linksOf('[a](x.md#y) `[b](code.md)`\n```\n[c](fenced.md)\n```\n![d](img.png "title")\n[e]: <ref.md>\n'), [
    { line: 1, target: 'x.md#y' },
    { line: 5, target: 'img.png' },
    { line: 6, target: 'ref.md' },
  ]);
});

test('a heading repeated in one file is reported at its second place; the same words in code or another level of text are not headings', (t) => {
  t.deepEqual(repeatedHeadings('# A\n## Limits\ntext\n### Limits\n```\n## Limits\n```\n## Other\n'), [{ line: 4, heading: 'Limits' }]);
  t.deepEqual(repeatedHeadings('# A\n## Limits of B\n## Limits\n'), []);
});

test('npm run docs:check exits 1 and names the broken link', async (t) => {
  const broken = mkdtempSync(path.join(tmpdir(), 'intake-docs-broken-'));
  try {
    cpSync(copy, broken, { recursive: true });
    const readme = path.join(broken, 'README.md');
    writeFileSync(readme, readFileSync(readme, 'utf8').replace('](docs/operations.md)', '](docs/nowhere.md)'));
    const err = await run('npm', ['run', '-s', 'docs:check', '--', broken], { cwd: ROOT }).then(
      () => null,
      (e: { code: number; stderr: string }) => e,
    );
    t.is(err?.code, 1);
    t.regex(err?.stderr ?? '', /README\.md:\d+: link docs\/nowhere\.md: docs\/nowhere\.md does not exist/);
    t.regex(err?.stderr ?? '', /docs:check: 1 problem$/m);
  } finally {
    rmSync(broken, { recursive: true, force: true });
  }
});
