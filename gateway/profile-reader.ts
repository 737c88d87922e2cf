// Profiles reads grouped (common/group-batch.ts): the lookups that arrive together are one
// statement, one round trip, instead of one each.
import type pg from 'pg';
import { createGroupBatch, type GroupBatch, type GroupBatchOptions } from '../common/group-batch.ts';
import { findProfiles, type ProfileLookup, type ProfileView } from '../common/store/profiles.ts';

export type ProfileReader = GroupBatch<ProfileLookup, ProfileView | null>;

export function createProfileReader(pool: pg.Pool, options: GroupBatchOptions): ProfileReader {
  return createGroupBatch((lookups: ProfileLookup[]) => findProfiles(pool, lookups), options);
}
