// intake operator …: the accounts of the dashboard's console and admin API. The rules (names,
// passwords, hashing, tokens, the audit) live in gateway/console/operators.ts, which the
// dashboard uses too.
import {
  addOperator,
  createToken,
  isValidOperatorName,
  listConsoleAudit,
  listOperators,
  passwordProblem,
  removeOperator,
  type Role,
} from '../../gateway/console/operators.ts';
import { readArgs } from '../args.ts';
import { OperatorError, type OperatorDeps } from '../../operations/operator.ts';

/** operator add <name> --role admin|read-only [--password-stdin] */
export async function operatorAdd(deps: OperatorDeps, argv: string[]) {
  const { positionals, values, usageError } = readArgs(argv, 'operator add');
  const [name] = positionals;
  if (!isValidOperatorName(name))
    throw usageError(`invalid name ${JSON.stringify(name)}: 1-64 letters, digits, ".", "_", "@" or "-", starting with a letter or digit`);
  const input = deps.in ?? process.stdin;
  let password: string;
  if (values['password-stdin'] === 'true') password = await firstLine(input);
  else if ((input as NodeJS.ReadStream).isTTY) {
    password = await askHidden(input as NodeJS.ReadStream, 'password: ');
    if ((await askHidden(input as NodeJS.ReadStream, 'again: ')) !== password) throw new OperatorError('the passwords differ');
  } else throw usageError('stdin is not a terminal: give --password-stdin and the password on its first line');
  const problem = passwordProblem(password);
  if (problem) throw new OperatorError(problem);
  return addOperator(deps.db, name, values.role as Role, password);
}

/** operator remove <name> */
export async function operatorRemove(deps: OperatorDeps, argv: string[]) {
  const [name] = readArgs(argv, 'operator remove').positionals;
  return removeOperator(deps.db, name);
}

/** operator list */
export async function operatorList(deps: OperatorDeps, argv: string[]) {
  readArgs(argv, 'operator list');
  return listOperators(deps.db);
}

/** operator token <name>: the only time the token is shown. */
export async function operatorToken(deps: OperatorDeps, argv: string[]) {
  const [name] = readArgs(argv, 'operator token').positionals;
  return createToken(deps.db, name);
}

/** operator audit [--limit <count>] */
export async function operatorAudit(deps: OperatorDeps, argv: string[]) {
  const { numbers } = readArgs(argv, 'operator audit');
  return listConsoleAudit(deps.db, numbers.limit);
}

/** The first line of a stream (without its line ending); at most 4 KiB are read. */
async function firstLine(input: NodeJS.ReadableStream): Promise<string> {
  let text = '';
  for await (const chunk of input) {
    text += chunk.toString();
    if (text.includes('\n') || text.length > 4096) break;
  }
  const line = text.split('\n')[0].replace(/\r$/, '');
  if (!line) throw new OperatorError('no password on stdin');
  return line;
}

/** Asks on stderr and reads a line from the terminal without echoing it. */
function askHidden(input: NodeJS.ReadStream, prompt: string): Promise<string> {
  // Echo off before the prompt shows: what is typed once it shows is never echoed.
  input.setRawMode(true);
  process.stderr.write(prompt);
  input.resume();
  input.setEncoding('utf8');
  return new Promise((resolve, reject) => {
    let line = '';
    const done = (err?: Error) => {
      input.setRawMode(false);
      input.pause();
      input.off('data', onData);
      process.stderr.write('\n');
      if (err) reject(err);
      else resolve(line);
    };
    const onData = (chunk: string) => {
      for (const c of chunk) {
        if (c === '\r' || c === '\n') return done();
        if (c === '\u0003' || c === '\u0004') return done(new OperatorError('cancelled'));
        if (c === '\u007f' || c === '\b') line = [...line].slice(0, -1).join('');
        else line += c;
      }
    };
    input.on('data', onData);
  });
}
