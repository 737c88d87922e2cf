// Journey definitions: created by operators, published once, read by the journey engine.
import type { Db } from '../platform/db.ts';
import { FEATURE } from '../environments/features.ts';
import { eventNamesOf, type JourneyDefinition } from './journey-definition.ts';
import { fromPgText, toPgText } from '../platform/pg-text.ts';

export interface JourneyView extends JourneyDefinition {
  id: string;
  publishedAt: number | null;
  createdAt: number;
}

interface JourneyRow {
  id: string;
  definition: string;
  publishedAt: Date | null;
  createdAt: Date;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function toView(row: JourneyRow): JourneyView {
  return {
    id: row.id,
    ...(JSON.parse(row.definition) as JourneyDefinition),
    publishedAt: row.publishedAt?.getTime() ?? null,
    createdAt: row.createdAt.getTime(),
  };
}

export async function createJourney(db: Db, environmentId: string, def: JourneyDefinition): Promise<JourneyView> {
  const row = await db.journey.create({
    data: {
      environmentId,
      name: def.name,
      definition: JSON.stringify(def),
      eventNames: eventNamesOf(def).map(toPgText),
      entryTrait: 'attributeChanged' in def.entry ? def.entry.attributeChanged : null,
    },
  });
  return toView(row);
}

export async function findJourney(db: Db, environmentId: string, id: string): Promise<JourneyView | null> {
  if (!UUID.test(id)) return null;
  const row = await db.journey.findFirst({ where: { id, environmentId } });
  return row ? toView(row) : null;
}

/** Sets the publication time once; publishing again returns the journey as it is. */
export async function publishJourney(db: Db, environmentId: string, id: string, at: Date): Promise<JourneyView | null> {
  if (!UUID.test(id)) return null;
  await db.journey.updateMany({ where: { id, environmentId, publishedAt: null }, data: { publishedAt: at } });
  return findJourney(db, environmentId, id);
}

export async function listJourneys(db: Db, environmentId: string): Promise<JourneyView[]> {
  const rows = await db.journey.findMany({ where: { environmentId }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] });
  return rows.map(toView);
}

export interface JourneyStats {
  entered: number;
  active: number;
  completed: number;
  exited: number;
  converted: number;
}

export async function journeyStats(db: Db, journeyId: string): Promise<JourneyStats> {
  const [row] = await db.$queryRaw<{ entered: number; active: number; completed: number; exited: number; converted: number }[]>`
    SELECT count(*)::int AS entered,
           count(*) FILTER (WHERE status = 'active')::int AS active,
           count(*) FILTER (WHERE status = 'completed')::int AS completed,
           count(*) FILTER (WHERE status = 'exited')::int AS exited,
           count(converted_at)::int AS converted
    FROM journey_runs WHERE journey_id = ${journeyId}::uuid`;
  return { ...row };
}

/** A published journey as the engine sees it; `definition` is parsed once per journey (it never changes). */
export interface PublishedJourney {
  id: string;
  environmentId: string;
  publishedAt: number;
  eventNames: ReadonlySet<string>;
  entryTrait: string | null;
  definition: JourneyDefinition;
}

// Published journeys never change (definitions are immutable, publication is set once), so
// each is read and parsed once per process; the per-batch query returns ids only.
const published = new Map<string, PublishedJourney>();

async function loadPublished(db: Db, ids: string[]): Promise<PublishedJourney[]> {
  const missing = ids.filter((id) => !published.has(id));
  if (missing.length) {
    const rows = await db.journey.findMany({ where: { id: { in: missing }, publishedAt: { not: null } } });
    for (const r of rows) {
      const definition = JSON.parse(r.definition) as JourneyDefinition;
      published.set(r.id, {
        id: r.id,
        environmentId: r.environmentId,
        publishedAt: r.publishedAt!.getTime(),
        eventNames: new Set(eventNamesOf(definition)),
        entryTrait: r.entryTrait,
        definition,
      });
    }
  }
  return ids.flatMap((id) => published.get(id) ?? []);
}

/** The published journeys of some environments (one small query; definitions come from memory). */
export async function publishedJourneys(db: Db, environmentIds: readonly string[]): Promise<PublishedJourney[]> {
  if (!environmentIds.length) return [];
  const rows = await db.$queryRaw<{ id: string }[]>`
    SELECT id FROM journeys WHERE environment_id = ANY(${[...new Set(environmentIds)]}::uuid[]) AND published_at IS NOT NULL`;
  return rows.length
    ? loadPublished(
        db,
        rows.map((r) => r.id),
      )
    : [];
}

/** A journey's definition by id (from memory once read: definitions never change). */
export async function journeyDefinition(db: Db, id: string): Promise<JourneyDefinition> {
  const known = published.get(id);
  if (known) return known.definition;
  const row = await db.journey.findUniqueOrThrow({ where: { id }, select: { definition: true } });
  return JSON.parse(row.definition) as JourneyDefinition;
}

/**
 * The environment's published `attributeChanged` journeys, or none when its organization does
 * not have the `attribute-trigger` feature (checked when the change happens, so turning the
 * feature off stops new entries).
 */
export async function attributeJourneys(db: Db, environmentId: string): Promise<PublishedJourney[]> {
  const rows = await db.$queryRaw<{ id: string }[]>`
    SELECT j.id FROM journeys j
      JOIN environments e ON e.id = j.environment_id
      JOIN organizations o ON o.id = e.organization_id
    WHERE j.environment_id = ${environmentId}::uuid AND j.published_at IS NOT NULL AND j.entry_trait IS NOT NULL
      AND ${FEATURE.attributeTrigger}::text = ANY(o.features)`;
  return rows.length
    ? loadPublished(
        db,
        rows.map((r) => r.id),
      )
    : [];
}

export interface ActivityItem {
  event: string;
  messageId: string;
  userId: string | null;
  anonymousId: string | null;
  source: 'track-api';
  status: string;
  receivedAt: number;
}

/** Stored events whose name a published journey of the environment uses, newest first. */
export async function journeyActivity(db: Db, environmentId: string, limit: number): Promise<{ names: string[]; items: ActivityItem[] }> {
  const [names] = await db.$queryRaw<{ names: string[] | null }[]>`
    SELECT array_agg(DISTINCT n) AS names FROM journeys, unnest(event_names) AS n
    WHERE environment_id = ${environmentId}::uuid AND published_at IS NOT NULL`;
  const escaped = names?.names ?? [];
  if (!escaped.length) return { names: [], items: [] };
  const rows = await db.$queryRaw<
    { event: string; message_id: string; user_id: string | null; anonymous_id: string | null; status: string; received_at: Date }[]
  >`
    SELECT event, message_id, user_id, anonymous_id, status, received_at FROM events
    WHERE environment_id = ${environmentId}::uuid AND event = ANY(${escaped}::text[])
    ORDER BY received_at DESC, id DESC LIMIT ${limit}`;
  return {
    names: escaped.map(fromPgText),
    items: rows.map((r) => ({
      event: fromPgText(r.event),
      messageId: fromPgText(r.message_id),
      userId: r.user_id === null ? null : fromPgText(r.user_id),
      anonymousId: r.anonymous_id === null ? null : fromPgText(r.anonymous_id),
      source: 'track-api',
      status: r.status,
      receivedAt: r.received_at.getTime(),
    })),
  };
}
