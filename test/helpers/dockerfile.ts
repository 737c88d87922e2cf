// The Dockerfile read as Docker reads it, enough for static checks (there is no engine here):
// instructions joined across `\` continuations, grouped into stages.
import { readFileSync } from 'node:fs';

export interface Instruction {
  keyword: string;
  /** Everything after the keyword, continuations joined. */
  args: string;
  /** `--name=value` flags at the start of args (COPY --from, HEALTHCHECK --interval, …). */
  flags: Record<string, string>;
  /** args without the leading flags. */
  rest: string;
}

export interface Stage {
  name: string | undefined;
  /** What FROM names: an image, or an earlier stage's name. */
  base: string;
  instructions: Instruction[];
}

export function readDockerfile(file: string): Stage[] {
  const lines = readFileSync(file, 'utf8')
    .replace(/\\\r?\n/g, ' ')
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  const stages: Stage[] = [];
  for (const line of lines) {
    const [, keyword, args] = /^(\S+)\s*(.*)$/.exec(line)!;
    const instruction = parseInstruction(keyword!.toUpperCase(), args!);
    if (instruction.keyword === 'FROM') {
      const [base, as, name] = instruction.rest.split(/\s+/);
      stages.push({ base: base!, name: as?.toUpperCase() === 'AS' ? name : undefined, instructions: [] });
    } else {
      if (!stages.length) throw new Error(`${keyword} before FROM`);
      stages.at(-1)!.instructions.push(instruction);
    }
  }
  return stages;
}

function parseInstruction(keyword: string, args: string): Instruction {
  const flags: Record<string, string> = {};
  let rest = args;
  for (let m = /^--([\w-]+)(?:=(\S*))?\s*/.exec(rest); m; m = /^--([\w-]+)(?:=(\S*))?\s*/.exec(rest)) {
    flags[m[1]!] = m[2] ?? '';
    rest = rest.slice(m[0].length);
  }
  return { keyword, args, flags, rest };
}

/** A COPY's sources and destination (shell form; the exec form's JSON array too). */
export function copyPaths(copy: Instruction): { sources: string[]; dest: string } {
  const parts = copy.rest.startsWith('[') ? (JSON.parse(copy.rest) as string[]) : copy.rest.split(/\s+/);
  return { sources: parts.slice(0, -1), dest: parts.at(-1)! };
}

/** A HEALTHCHECK's or CMD's command in exec form (`CMD ["node", …]`). */
export function execForm(instruction: Instruction): string[] {
  const text = instruction.rest.replace(/^CMD\s+/, '');
  if (!text.startsWith('[')) throw new Error(`not in exec form: ${instruction.args}`);
  return JSON.parse(text) as string[];
}
