// The one rule for a blank ID (profiles/ids.ts), read by Track and Identify validation and journeys.
import test from 'ava';
import { hasId } from '../../profiles/ids.ts';

test('an empty or whitespace-only ID counts as absent; anything else is an ID', (t) => {
  t.false(hasId(null));
  t.false(hasId(undefined));
  t.false(hasId(''));
  t.false(hasId(' \t\n\u00a0'));
  t.true(hasId(' a '));
  t.true(hasId('0'));
});
