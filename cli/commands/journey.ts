import { readFile } from 'node:fs/promises';
import { FEATURE, hasFeature } from '../../environments/features.ts';
import { parseJourneyDefinition } from '../../journeys/journey-definition.ts';
import { listRuns } from '../../journeys/run-store.ts';
import { createJourney, findJourney, journeyStats, listJourneys, publishJourney } from '../../journeys/journey-store.ts';
import { readArgs } from '../args.ts';
import { environmentCommand } from '../environment-command.ts';
import { findEnvironment, findLiveEnvironment, OperatorError, type OperatorDeps } from '../../operations/operator.ts';

/** journey create <org-slug> --file <journey.json> [--env <path-value>]: the journey, unpublished. */
export async function journeyCreate(deps: OperatorDeps, argv: string[]) {
  const {
    positionals: [orgSlug],
    values,
  } = readArgs(argv, 'journey create');
  const file = values.file!; // required by the table
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new OperatorError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  let input: unknown;
  try {
    input = JSON.parse(text);
  } catch (err) {
    throw new OperatorError(`invalid journey: ${file} is not JSON (${(err as Error).message})`);
  }
  const parsed = parseJourneyDefinition(input);
  if (!parsed.ok) throw new OperatorError(`invalid journey: ${parsed.errors.join('; ')}`);
  const { org, env } = await findLiveEnvironment(deps.db, orgSlug, values.env);
  if ('attributeChanged' in parsed.value.entry && !hasFeature(org.features, FEATURE.attributeTrigger)) {
    // Created all the same: the feature is checked when a trait changes, so it can be turned on later.
    console.error(`warning: ${org.slug} does not have the ${FEATURE.attributeTrigger} feature; this journey starts no run until it has`);
  }
  return createJourney(deps.db, env.id, parsed.value);
}

/** journey publish <org-slug> <journey-id> [--env <path-value>]: the journey with publishedAt (set once). */
export async function journeyPublish(deps: OperatorDeps, argv: string[]) {
  const { env, id } = await journeyArgs(deps, argv, 'journey publish', findLiveEnvironment);
  const journey = await publishJourney(deps.db, env.id, id, new Date());
  if (!journey) throw noJourney(id, env.pathValue);
  return journey;
}

/** journey list <org-slug> [--env <path-value>]: every journey of the environment, oldest first. */
export async function journeyList(deps: OperatorDeps, argv: string[]) {
  const { env } = await environmentCommand(deps, argv, 'journey list');
  return listJourneys(deps.db, env.id);
}

/** journey stats <org-slug> <journey-id> [--env <path-value>]: {entered, active, completed, exited, converted}. */
export async function journeyStatsCommand(deps: OperatorDeps, argv: string[]) {
  const { env, id } = await journeyArgs(deps, argv, 'journey stats');
  if (!(await findJourney(deps.db, env.id, id))) throw noJourney(id, env.pathValue);
  return journeyStats(deps.db, id);
}

/** journey runs <org-slug> <journey-id> [--user <userId>] [--env <path-value>]: each run with its step and what its sends did. */
export async function journeyRuns(deps: OperatorDeps, argv: string[]) {
  const { env, id, values } = await journeyArgs(deps, argv, 'journey runs');
  if (!(await findJourney(deps.db, env.id, id))) throw noJourney(id, env.pathValue);
  return listRuns(deps.db, id, values.user);
}

async function journeyArgs(deps: OperatorDeps, argv: string[], command: 'journey publish' | 'journey stats' | 'journey runs', find = findEnvironment) {
  const {
    env,
    positionals: [, id],
    values,
  } = await environmentCommand(deps, argv, command, find);
  return { env, id, values };
}

const noJourney = (id: string, pathValue: string) => new OperatorError(`no journey ${id} in ${pathValue}`);
