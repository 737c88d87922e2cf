// The generated parts of the docs: each is the output of a function of the code, written
// between two marker lines of one Markdown file by `npm run docs:generate`, and compared with
// that output by `npm run docs:check`, so a reference cannot drift from what it describes.
import { describeConfig } from '../../platform/config.ts';
import { COMMANDS, GROUPS, commandHelp, groupHelp, overview, spec, type CommandName } from '../../cli/usage.ts';

export interface GeneratedSection {
  /** The Markdown file holding it, relative to the project's root. */
  file: string;
  name: string;
  /** Where its text comes from, named in the start marker. */
  source: string;
  render(): string;
}

export const SECTIONS: readonly GeneratedSection[] = [
  { file: 'docs/configuration.md', name: 'configuration', source: 'platform/config.ts', render: configTable },
  { file: 'docs/cli.md', name: 'cli', source: 'cli/usage.ts', render: cliReference },
];

/** A whole file that is the output of a function of the code (no hand-written part). */
export interface GeneratedFile {
  file: string;
  source: string;
  render(): string;
}

export const GENERATED_FILES: readonly GeneratedFile[] = [{ file: '.env.example', source: 'platform/config.ts', render: envExample }];

/** Words of `text` in lines of at most `width` characters, each starting with `prefix`. */
function wrap(text: string, width: number, prefix: string): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/)) {
    if (line && prefix.length + line.length + 1 + word.length > width) {
      lines.push(prefix + line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(prefix + line);
  return lines;
}

/** .env.example: every setting, commented out at its default, under its doc line. */
export function envExample(): string {
  const head = [
    '# Every setting of intake at its default, generated from platform/config.ts by `npm run docs:generate`.',
    '# Copy it to .env and uncomment what you change: `intake` (npm start, npx intake …, npm run doctor)',
    '# reads .env from its working directory, and a variable set in the environment wins over the file.',
    '# docs/configuration.md explains them.',
  ];
  const body = describeConfig().flatMap(({ env, default: d, doc }) => ['', ...wrap(doc, 100, '# '), `# ${env}=${d}`]);
  return [...head, ...body, ''].join('\n');
}

export const startMarker = (s: GeneratedSection) => `<!-- generated:${s.name} from ${s.source} by npm run docs:generate; edit the source, not this -->`;
export const endMarker = (s: GeneratedSection) => `<!-- /generated:${s.name} -->`;

const cell = (text: string) => text.replace(/\|/g, '\\|');

/** Every setting of platform/config.ts: its variable, default and doc line. */
export function configTable(): string {
  const rows = describeConfig().map(({ env, default: d, doc }) => `| \`${env}\` | ${d === '' ? '(empty)' : `\`${cell(d)}\``} | ${cell(doc)} |`);
  return ['| variable | default | meaning |', '|---|---|---|', ...rows].join('\n');
}

const block = (text: string) => ['```text', text, '```'].join('\n');

/** What `intake help`, `intake <group> --help` and `intake <command> --help` print, every one of them. */
export function cliReference(): string {
  const names = Object.keys(COMMANDS) as CommandName[];
  const commands = (list: CommandName[]) => list.flatMap((name) => [`#### \`intake ${name}\``, '', block(commandHelp(name)), '']);
  const parts = ['### `intake help`', '', block(overview()), '', '### Processes', '', ...commands(names.filter((n) => spec(n).section === 'process'))];
  for (const group of GROUPS) {
    parts.push(`### \`intake ${group}\``, '', block(groupHelp(group)), '');
    parts.push(...commands(names.filter((n) => n.startsWith(`${group} `))));
  }
  // An operator command of no group stands alone, under a heading of its own.
  for (const name of names.filter((n) => spec(n).section === 'operator' && !n.includes(' ')))
    parts.push(`### \`intake ${name}\``, '', block(commandHelp(name)), '');
  parts.push('### Client commands', '', ...commands(names.filter((n) => spec(n).section === 'client')));
  parts.push('### Local commands', '', ...commands(names.filter((n) => spec(n).section === 'local')));
  return parts.join('\n').trimEnd();
}

/** The text between a section's markers, or null when a marker is missing. */
export function readSection(markdown: string, section: GeneratedSection): string | null {
  const start = markdown.indexOf(startMarker(section));
  const end = markdown.indexOf(endMarker(section));
  if (start < 0 || end < start) return null;
  return markdown.slice(start + startMarker(section).length, end).trim();
}

/** The file's text with the section's current output between its markers. */
export function writeSection(markdown: string, section: GeneratedSection): string {
  const start = markdown.indexOf(startMarker(section));
  const end = markdown.indexOf(endMarker(section));
  if (start < 0 || end < start)
    throw new Error(`${section.file}: the markers of the ${section.name} section are missing:\n${startMarker(section)}\n${endMarker(section)}`);
  return `${markdown.slice(0, start + startMarker(section).length)}\n\n${section.render()}\n\n${markdown.slice(end)}`;
}
