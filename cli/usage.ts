// Every command's usage, in one table: `intake help`, `intake <group>`, `intake <command> --help`,
// the one-line usage errors and readArgs (which arguments and options a command takes, which
// option is required, which is a whole number in which range) all read it. Plain data and
// string rendering only, so printing help loads nothing else.

export interface OptionSpec {
  /** What follows the option in the synopsis: `<path-value>`. */
  value: string;
  help: string;
  /** Usage mistake when absent. */
  required?: boolean;
  /** A whole number in [min, max]; `unit` names it in the message ("a whole number of days from 1 to 3650"). */
  whole?: { min: number; max: number; default: number; unit: string };
  /** The only values accepted. */
  choices?: readonly string[];
  /** Takes no value: present or not. */
  flag?: boolean;
}

export interface CommandSpec {
  section: 'process' | 'operator' | 'client' | 'local';
  /** Positional arguments, in order (all required). */
  args: readonly string[];
  options: Readonly<Record<string, OptionSpec>>;
  /** One line: what the command does (and prints). */
  summary: string;
  /** Further lines of `--help`. */
  notes?: readonly string[];
}

const notifies: readonly string[] = [
  'Every gateway is told through Redis and confirms; if that cannot be confirmed within 10 s, the change stays made and the command exits 1 saying so: run it again.',
];
const env: OptionSpec = { value: '<path-value>', help: 'a non-production environment (Production when omitted)' };
const none = {} as const;
const by: OptionSpec = { value: '<name>', help: 'who runs it, for the audit (default: the OS user)' };
const suppressNotes: readonly string[] = [
  'Calls of the user ID received from then on are answered as the contract says (200 / 202) and stored nowhere; every gateway is told through Redis and confirms within 10 s, or the command exits 1 saying so (run it again). Workers and Identify check PostgreSQL too, so nothing received after the command is stored even by a gateway that has not heard.',
];

/** `events get` and `events retry`: one event of an environment, named by its messageId. */
function eventCommand(summary: string) {
  return { section: 'operator', args: ['org-slug', 'messageId'], options: { env }, summary } as const;
}

/** `users suppress` and `users unsuppress`: one user ID of an organization, the change audited under --by. */
function suppressionCommand(summary: string, notes: readonly string[]) {
  return { section: 'operator', args: ['org-slug', 'user-id'], options: { env, by }, summary, notes } as const;
}

export const COMMANDS = {
  gateway: {
    section: 'process',
    args: [],
    options: none,
    summary: 'the HTTP gateway: Identify, Track, Profiles, /healthz, /readyz, /metrics (PORT, HOST; GATEWAY_PROCESSES processes sharing the port)',
  },
  worker: {
    section: 'process',
    args: [],
    options: none,
    summary: 'the queue workers: store Track events, run journeys, relay the outbox (WORKER_METRICS_PORT)',
  },
  migrate: { section: 'process', args: [], options: none, summary: 'apply prisma/migrations to DATABASE_URL, creating the database if missing' },
  dashboard: {
    section: 'process',
    args: [],
    options: none,
    summary:
      'the queue dashboard on DASHBOARD_HOST:DASHBOARD_PORT (loopback by default); DASHBOARD_PASSWORD adds basic auth and is needed to show job data, to listen elsewhere and for DASHBOARD_READ_ONLY=false',
  },
  dev: {
    section: 'process',
    args: [],
    options: none,
    summary:
      'migrate, then gateway, worker and dashboard in one process, whatever GATEWAY_PROCESSES says (the dashboard is skipped with a warning when DASHBOARD_PORT is taken); once they listen, their URLs on stderr (gateway, dashboard, live view, metrics) before any JSON log line',
  },

  'org create': {
    section: 'operator',
    args: ['slug'],
    options: { features: { value: '<f1,f2>', help: 'features to turn on: join-by-email, attribute-trigger' } },
    summary: 'create an organization and its Production environment; prints {"slug","features"}',
  },
  'org features': {
    section: 'operator',
    args: ['slug'],
    options: { set: { value: '<f1,f2>', required: true, help: 'the features from now on (join-by-email, attribute-trigger); an empty value clears them' } },
    summary: "replace an organization's features; prints the organization",
    notes: notifies,
  },
  'env create': {
    section: 'operator',
    args: ['org-slug', 'path-value'],
    options: { key: { value: '<environment-key>', required: true, help: 'its X-Service-Environment value: 1-32 lowercase letters, digits or hyphens' } },
    summary: 'add a non-production environment; prints {"org","pathValue","key"}',
  },
  'env remove': {
    section: 'operator',
    args: ['org-slug', 'path-value'],
    options: none,
    summary: 'remove an environment: its requests and keys answer 403 from now on; prints {"org","pathValue","removed":true}',
    notes: notifies,
  },
  'env list': {
    section: 'operator',
    args: ['org-slug'],
    options: none,
    summary: 'the environments of an organization, Production first; prints [{"org","pathValue","key","production","removed","createdAt"}]',
  },
  'key create': {
    section: 'operator',
    args: ['org-slug'],
    options: { env },
    summary: 'create an API key; prints {"key","suffix","status":"active","environment"}, the only time the key is shown',
  },
  'key list': {
    section: 'operator',
    args: ['org-slug'],
    options: { env },
    summary: 'list the keys; prints [{"suffix","status","environment","createdAt"}]',
    notes: ['status: active, revoked, or environment-removed (the environment is removed: the key answers 403)'],
  },
  'key revoke': {
    section: 'operator',
    args: ['org-slug', 'suffix'],
    options: { env },
    summary: 'revoke the keys ending in <suffix>: 401 on every gateway from then on; prints {"suffix","status":"revoked"}',
    notes: notifies,
  },
  'events names': {
    section: 'operator',
    args: ['org-slug'],
    options: { env, days: { value: '<days>', help: 'the window', whole: { min: 1, max: 3650, default: 30, unit: 'days' } } },
    summary: 'the custom events list: names received in the window; prints [{"event","lastSeenAt","count"}]',
  },
  'events get': eventCommand('one event with its status (pending, processed, failed) and whether it may drive journeys'),
  'events activity': {
    section: 'operator',
    args: ['org-slug'],
    options: { env, limit: { value: '<count>', help: 'how many, newest first', whole: { min: 1, max: 10_000, default: 100, unit: 'events' } } },
    summary: 'the activity list: events whose name a published journey uses, stored or still queued',
  },
  'events retry': eventCommand('send a failed event through the worker once more; prints {"messageId","status":"retrying"}'),
  'journey create': {
    section: 'operator',
    args: ['org-slug'],
    options: { file: { value: '<journey.json>', required: true, help: 'the journey definition (docs/journeys.md)' }, env },
    summary: 'create a journey, unpublished; prints it with its id',
  },
  'journey publish': {
    section: 'operator',
    args: ['org-slug', 'journey-id'],
    options: { env },
    summary: 'publish a journey: it reacts to events received from now on; prints it with publishedAt',
  },
  'journey list': { section: 'operator', args: ['org-slug'], options: { env }, summary: 'every journey of the environment with its id and publishedAt' },
  'journey stats': {
    section: 'operator',
    args: ['org-slug', 'journey-id'],
    options: { env },
    summary: 'prints {"entered","active","completed","exited","converted"}',
  },
  'journey runs': {
    section: 'operator',
    args: ['org-slug', 'journey-id'],
    options: { user: { value: '<userId>', help: "only this person's runs" }, env },
    summary: 'each run with its step, what it waits for, and what its send steps did',
  },
  'consent get': {
    section: 'operator',
    args: ['org-slug', 'email|sms', 'address'],
    options: { purpose: { value: 'marketing|tracking', help: 'which consent (default marketing)', choices: ['marketing', 'tracking'] }, env },
    summary: 'the resolved consent decision for an address (with granted: granted and not lapsed), or null',
  },
  'users forget': {
    section: 'operator',
    args: ['org-slug', 'user-id'],
    options: { env, suppress: { value: '', flag: true, help: 'also drop every later call of this user ID (intake users suppress)' }, by },
    summary:
      'erase a person: profile (a joined profile whole, with every user ID that reads it), traits, address claims, events whose userId trims to one of them, journey runs and messages, Identify records, consent decisions of addresses no other profile holds; prints what was removed, counted per kind',
    notes: [
      'Events and Identify calls of the user received before the erasure but not yet stored are dropped when they arrive; calls received after it are new data, whatever their messageId (unless --suppress).',
      'The audit (intake users audit) records a keyed hash of the user ID, the counts and the operator, never the ID.',
    ],
  },
  'users suppress': suppressionCommand(
    'drop every later Identify and Track call of a user ID, answering it as usual; prints {"userHash","suppressedAt","changed"}',
    suppressNotes,
  ),
  'users unsuppress': suppressionCommand('store calls of a user ID again (nothing dropped meanwhile comes back); prints {"userHash","changed"}', notifies),
  'users suppressed': {
    section: 'operator',
    args: ['org-slug'],
    options: { env },
    summary: 'the suppressed user IDs, hashed, with the calls dropped since; prints [{"userHash","suppressedAt","dropped":{"identify","track"}}]',
  },
  'users audit': {
    section: 'operator',
    args: ['org-slug'],
    options: { env, user: { value: '<user-id>', help: "only this user ID's records (its keyed hash)" } },
    summary:
      'every forget, and every suppress and unsuppress that changed something: prints [{"environment","action","userHash","at","operator","counts"}], no raw user ID',
  },
  'users export': {
    section: 'operator',
    args: ['org-slug', 'user-id'],
    options: { env },
    summary:
      'everything held about a person as one JSON document, events streamed: {"userId","userHash","userIds","profile","addresses","consent","journeyRuns","events"}',
    notes: [
      'The document is written as it is read, from one snapshot of the database: a failure midway (exit 1, one line on stderr) leaves an incomplete document on stdout.',
    ],
  },

  'operator add': {
    section: 'operator',
    args: ['name'],
    options: {
      role: { value: 'admin|read-only', required: true, help: 'admin reads and changes; read-only reads', choices: ['admin', 'read-only'] },
      'password-stdin': { value: '', flag: true, help: 'read the password from the first line of stdin (else it is asked for on the terminal, twice)' },
    },
    summary: 'add an operator of the dashboard and its admin API; prints {"name","role","createdAt"}',
    notes: [
      'The name: 1-64 letters, digits, ".", "_", "@" or "-", starting with a letter or digit. The password: at least 12 characters, kept only as an scrypt hash with a salt of its own.',
      'Once an operator exists, the dashboard asks for a login (docs/operations.md, "Operators").',
    ],
  },
  'operator remove': {
    section: 'operator',
    args: ['name'],
    options: none,
    summary: 'remove an operator: its sessions and admin-API tokens stop working at once; prints {"name","removed":true,"sessionsRevoked","tokensRevoked"}',
  },
  'operator list': {
    section: 'operator',
    args: [],
    options: none,
    summary: 'every operator; prints [{"name","role","createdAt","tokens"}] (tokens: how many it holds)',
  },
  'operator token': {
    section: 'operator',
    args: ['name'],
    options: none,
    summary: 'a new admin-API token of the operator (Authorization: Bearer <token>); prints {"name","token","suffix"}, the only time the token is shown',
    notes: ["The token acts with its operator's role; it stops working when the operator is removed."],
  },
  'operator audit': {
    section: 'operator',
    args: [],
    options: { limit: { value: '<count>', help: 'how many, newest first', whole: { min: 1, max: 10_000, default: 100, unit: 'records' } } },
    summary: 'the changes made in the dashboard and through the admin API: prints [{"id","at","operator","action","target","detail"}], no personal data',
  },

  storage: {
    section: 'operator',
    args: [],
    options: none,
    summary:
      'what is stored, per table: rows, bytes, oldest and newest partition or row, and what retention removes next; prints {"events":{…},"event_ids":{…},"identify_messages":{…},"address_claims":{…},"outbox_events":{…},"consent_decisions":{…}}',
    notes: [
      "rows are exact for a table under 64 MB and PostgreSQL's estimate (its last ANALYZE) above, with rowsEstimated: true.",
      'events: its daily partitions, partitionsAheadDays (made ahead of today), the oldest event, the retention (EVENTS_RETENTION_DAYS) and nextRemoval: the partition it drops next and from when; legacyRows while a pre-partitioning table is being moved over.',
      'Consent decisions are never removed: they are the proof of consent.',
    ],
  },

  import: {
    section: 'client',
    args: ['org-slug'],
    options: {
      file: { value: '<customers.ndjson>', required: true, help: 'one Identify call per line' },
      env: { ...env, help: 'import into a non-production environment' },
      'env-key': { value: '<environment-key>', help: 'with --env: its X-Service-Environment value (read from the database when omitted)' },
      concurrency: {
        value: '<n>',
        help: 'requests at a time (the API contract suggests 10 or fewer)',
        whole: { min: 1, max: 100, default: 10, unit: 'requests' },
      },
      url: { value: '<gateway-url>', help: 'the gateway (default INTAKE_URL, else http://127.0.0.1:PORT)' },
      key: { value: '<key>', help: 'the API key (default: INTAKE_API_KEY)' },
    },
    summary: 'load customers through the public Identify API; progress on stderr, a JSON summary on stdout',
    notes: [
      'An interrupted import resumes from <file>.checkpoint.json when run again; failed lines go to <file>.failed.ndjson.',
      'Events are never replayed through Track (--track is refused).',
      'The gateway is INTAKE_URL (default http://127.0.0.1:PORT), the key INTAKE_API_KEY, both also read from .env.',
    ],
  },

  config: {
    section: 'local',
    args: [],
    options: { get: { value: '<NAME>', help: 'print only this setting, as plain text (for a shell: $(npx intake config --get INTAKE_URL))' } },
    summary:
      'the settings this checkout runs with (environment, then .env, then defaults); prints {"NAME":"value"}, secrets masked, and {"INTAKE_URL"} resolved',
  },
} as const satisfies Record<string, CommandSpec>;

export type CommandName = keyof typeof COMMANDS;
type Section<S> = { [K in CommandName]: (typeof COMMANDS)[K]['section'] extends S ? K : never }[CommandName];
export type ProcessName = Section<'process'>;
export type OperatorName = Section<'operator'>;

export function isCommand(name: string): name is CommandName {
  return Object.hasOwn(COMMANDS, name);
}

export function spec(name: CommandName): CommandSpec {
  return COMMANDS[name];
}

/** Subcommands of a group (`org` → create, features); empty when `group` is none. */
export function subcommands(group: string): string[] {
  return Object.keys(COMMANDS)
    .filter((name) => name.startsWith(`${group} `))
    .map((name) => name.slice(group.length + 1));
}

/** Groups of operator commands: the first word of every two-word command. */
export const GROUPS = [...new Set(Object.keys(COMMANDS).flatMap((name) => (name.includes(' ') ? [name.split(' ')[0]] : [])))];

const GROUP_SUMMARIES: Record<string, string> = {
  org: 'organizations and their features',
  env: 'environments of an organization',
  key: 'API keys',
  events: 'received Track events',
  journey: 'journeys',
  consent: 'consent decisions',
  users: 'privacy operations on one person: erase, suppress, audit, export',
  operator: 'operators of the dashboard and its admin API: accounts, tokens, audit',
};

function optionText(name: string, option: OptionSpec): string {
  return option.flag ? `--${name}` : `--${name} ${option.value}`;
}

/** `intake events names <org-slug> [--env <path-value>] [--days <days>]` */
export function synopsis(name: CommandName): string {
  const { args, options } = spec(name);
  const parts = [`intake ${name}`, ...args.map((a) => `<${a}>`)];
  for (const [option, o] of Object.entries(options)) parts.push(o.required ? optionText(option, o) : `[${optionText(option, o)}]`);
  return parts.join(' ');
}

/** What an option accepts, in words: shared by --help and the usage error of a bad value. */
export function accepted(option: OptionSpec): string | null {
  if (option.whole) {
    const { min, max, unit } = option.whole;
    return `a whole number of ${unit} from ${min} to ${max}`;
  }
  if (option.choices) return option.choices.join(' or ');
  return null;
}

function columns(rows: [string, string][]): string[] {
  const width = Math.max(...rows.map(([left]) => left.length)) + 2;
  return rows.map(([left, right]) => `  ${left.padEnd(width)}${right}`.trimEnd());
}

/** `intake <command> --help`. */
export function commandHelp(name: CommandName): string {
  const s = spec(name);
  const lines = [`usage: ${synopsis(name)}`, '', s.summary];
  const options = Object.entries(s.options);
  if (options.length) {
    const rows = options.map(([option, o]): [string, string] => {
      const bounds = accepted(o);
      const detail = [o.help, o.whole ? `${bounds}, default ${o.whole.default}` : null].filter(Boolean).join(': ');
      return [optionText(option, o), o.required ? `${detail} (required)` : detail];
    });
    lines.push('', 'options:', ...columns(rows));
  }
  if (s.notes?.length) lines.push('', ...s.notes);
  return lines.join('\n');
}

/** `intake <group>` and `intake <group> --help`. */
export function groupHelp(group: string): string {
  const names = subcommands(group).map((sub) => `${group} ${sub}` as CommandName);
  const lines = [`usage: intake ${group} <command>`, '', `${GROUP_SUMMARIES[group]}:`];
  for (const name of names) lines.push(`  ${synopsis(name)}`, `      ${spec(name).summary}`);
  lines.push('', `intake ${group} <command> --help shows a command's options.`);
  return lines.join('\n');
}

/** `intake help`: every command. */
export function overview(): string {
  const names = Object.keys(COMMANDS) as CommandName[];
  const of = (section: CommandSpec['section']) => names.filter((n) => spec(n).section === section);
  return [
    'usage: intake <command> [arguments] [--help]',
    '',
    'processes:',
    ...columns(of('process').map((n) => [n, spec(n).summary])),
    '',
    'operator commands (one JSON document on stdout):',
    ...of('operator').map((n) => `  ${synopsis(n).slice('intake '.length)}`),
    '',
    'client commands (through the public API; a JSON summary on stdout, progress on stderr):',
    ...of('client').map((n) => `  ${synopsis(n).slice('intake '.length)}`),
    '',
    'local commands (this checkout only; no service is contacted):',
    ...of('local').map((n) => `  ${synopsis(n).slice('intake '.length)}`),
    '',
    `intake <command> --help shows its usage and options; intake help <group> lists a group's commands (${GROUPS.join(', ')}).`,
    'Exit status: 0 done, 1 failed (one line on stderr), 2 usage mistake (one line on stderr).',
  ].join('\n');
}
