// Profiles reads grouped (platform/group-batch.ts): the lookups that arrive together are one
// statement, one round trip, instead of one each. They go to the read replica while it is fit
// (platform/read-replica.ts); a read the replica fails is made again on the primary at once.
import type pg from 'pg';
import { createGroupBatch, type GroupBatch, type GroupBatchOptions } from '../platform/group-batch.ts';
import type { ReadRoute } from '../platform/read-replica.ts';
import { findProfiles, type ProfileLookup, type ProfileView } from './profile-store.ts';

export type ProfileReader = GroupBatch<ProfileLookup, ProfileView | null>;

export function createProfileReader(primary: pg.Pool, options: GroupBatchOptions, route?: Pick<ReadRoute, 'pool' | 'failed'>): ProfileReader {
  return createGroupBatch(async (lookups: ProfileLookup[]) => {
    const pool = route?.pool() ?? primary;
    if (pool === primary) return findProfiles(primary, lookups);
    try {
      return await findProfiles(pool, lookups);
    } catch {
      route!.failed();
      return findProfiles(primary, lookups);
    }
  }, options);
}
