// npm run docs:check [root]: the docs cannot drift. Fails (exit 1, one line per problem) on a
// relative link or anchor of any Markdown file that leads nowhere, on a generated section or file
// (scripts/docs/sections.mts: the configuration table, the CLI reference, .env.example) that
// differs from what its source gives now, on a setting's default stated otherwise than
// platform/config.ts has it (scripts/docs/defaults.mts), on a heading a Markdown file repeats, and
// on development history written into any file of the project (scripts/docs/history.mts).
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { wrongDefaults } from './defaults.mts';
import { findHistory } from './history.mts';
import { anchorsOf, linksOf, repeatedHeadings } from './links.mts';
import { GENERATED_FILES, SECTIONS, endMarker, readSection, startMarker } from './sections.mts';

const HERE = path.relative(path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..'), fileURLToPath(import.meta.url));
/** The one file allowed to spell the banned phrases out. */
const PATTERNS_FILE = path.join(path.dirname(HERE), 'history.mts');
/** Not text of the project: lock files are written by npm. */
const NOT_CHECKED = new Set(['package-lock.json', 'clients/typescript/package-lock.json']);

/**
 * The project's files, relative to `root`: those git tracks (a new file once it is added), or,
 * outside a git checkout, every file but node_modules, .git and what .gitignore names.
 */
export function projectFiles(root: string): string[] {
  if (existsSync(path.join(root, '.git'))) {
    const out = execFileSync('git', ['ls-files', '-z', '--cached'], { cwd: root, encoding: 'utf8', maxBuffer: 64 << 20 });
    return [...new Set(out.split('\0').filter(Boolean))].filter((f) => existsSync(path.join(root, f)));
  }
  const ignored = ignoredBy(root);
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(path.join(root, dir))) {
      const rel = dir ? `${dir}/${name}` : name;
      if (name === 'node_modules' || name === '.git' || ignored(rel)) continue;
      if (statSync(path.join(root, rel)).isDirectory()) walk(rel);
      else files.push(rel);
    }
  };
  walk('');
  return files;
}

/** The simple .gitignore patterns (names and `*` globs, anchored or not) as a test of a relative path. */
function ignoredBy(root: string): (rel: string) => boolean {
  const file = path.join(root, '.gitignore');
  if (!existsSync(file)) return () => false;
  const tests = readFileSync(file, 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#') && !l.startsWith('!'))
    .map((pattern) => {
      const anchored = pattern.replace(/\/$/, '').includes('/');
      const glob = pattern.replace(/^\//, '').replace(/\/$/, '');
      const re = new RegExp(`^${glob.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')}$`);
      return (rel: string) => (anchored ? re.test(rel) : re.test(path.posix.basename(rel)));
    });
  return (rel) => tests.some((t) => t(rel));
}

function isText(bytes: Buffer): boolean {
  return !bytes.subarray(0, 8000).includes(0);
}

/** Every problem found under `root`, as `file:line: what`. */
export function checkDocs(root: string): string[] {
  const problems: string[] = [];
  const files = projectFiles(root);
  const texts = new Map<string, string>();
  for (const file of files) {
    if (NOT_CHECKED.has(file)) continue;
    const bytes = readFileSync(path.join(root, file));
    if (isText(bytes)) texts.set(file, bytes.toString('utf8'));
  }

  const anchorCache = new Map<string, Set<string>>();
  const anchorsIn = (file: string) => {
    if (!anchorCache.has(file)) anchorCache.set(file, anchorsOf(readFileSync(file, 'utf8')));
    return anchorCache.get(file)!;
  };
  for (const [file, text] of texts) {
    if (!file.endsWith('.md')) continue;
    for (const { line, target } of linksOf(text)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:…
      const [rawPath, anchor] = target.split('#', 2);
      let decoded: string;
      try {
        decoded = decodeURIComponent(rawPath);
      } catch {
        problems.push(`${file}:${line}: link ${target} is not a valid URL`);
        continue;
      }
      const resolved =
        decoded === '' ? path.join(root, file) : decoded.startsWith('/') ? path.join(root, decoded) : path.resolve(root, path.dirname(file), decoded);
      if (resolved !== root && !resolved.startsWith(root + path.sep)) {
        problems.push(`${file}:${line}: link ${target} leaves the project`);
        continue;
      }
      if (!existsSync(resolved)) {
        problems.push(`${file}:${line}: link ${target}: ${path.relative(root, resolved)} does not exist`);
        continue;
      }
      if (anchor !== undefined && resolved.endsWith('.md') && !anchorsIn(resolved).has(anchor)) {
        problems.push(`${file}:${line}: link ${target}: ${path.relative(root, resolved)} has no heading or anchor "${anchor}"`);
      }
    }
  }

  for (const [file, text] of texts) {
    if (!file.endsWith('.md')) continue;
    for (const { line, heading } of repeatedHeadings(text))
      problems.push(`${file}:${line}: heading "${heading}" repeats an earlier one: one heading per section, or a link cannot tell them apart`);
  }

  for (const section of SECTIONS) {
    const file = path.join(root, section.file);
    if (!existsSync(file)) {
      problems.push(`${section.file}: missing (it holds the generated ${section.name} section)`);
      continue;
    }
    const current = readSection(readFileSync(file, 'utf8'), section);
    if (current === null) problems.push(`${section.file}: the ${section.name} section's markers are missing: ${startMarker(section)} … ${endMarker(section)}`);
    else if (current !== section.render().trim())
      problems.push(`${section.file}: the ${section.name} section differs from what ${section.source} gives: run npm run docs:generate`);
  }

  for (const generated of GENERATED_FILES) {
    const file = path.join(root, generated.file);
    if (!existsSync(file)) problems.push(`${generated.file}: missing (generated from ${generated.source}): run npm run docs:generate`);
    else if (readFileSync(file, 'utf8') !== generated.render())
      problems.push(`${generated.file}: differs from what ${generated.source} gives: run npm run docs:generate`);
  }

  for (const [file, text] of texts) {
    if (!/\.(md|ya?ml)$/.test(file)) continue;
    for (const w of wrongDefaults(text))
      problems.push(`${file}:${w.line}: \`${w.name}\` is said to default to ${w.stated}; platform/config.ts says ${w.actual}`);
  }

  for (const [file, text] of texts) {
    if (file === PATTERNS_FILE) continue;
    for (const finding of findHistory(text)) problems.push(`${file}:${finding.line}: ${finding.why}: ${finding.text}`);
  }
  return problems;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const root = path.resolve(process.argv[2] ?? path.join(path.dirname(fileURLToPath(import.meta.url)), '../..'));
  const problems = checkDocs(root);
  for (const p of problems) console.error(p);
  if (problems.length) {
    console.error(`docs:check: ${problems.length} problem${problems.length === 1 ? '' : 's'}`);
    process.exitCode = 1;
  } else console.log('docs:check: links, generated sections and wording are in order');
}
