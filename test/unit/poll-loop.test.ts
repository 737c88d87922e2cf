import test from 'ava';
import { createLogger } from '../../platform/logger.ts';
import { startPollLoop, type PollLoop } from '../../platform/poll-loop.ts';

const log = createLogger('silent', 'test');
const HOUR = 3_600_000;

/** A loop whose first round waits until `end` is called, with how it ends. */
async function loopInRound(end: 'resolve' | 'reject'): Promise<{ loop: PollLoop; end(): void }> {
  let finish!: (stopping: boolean) => void;
  let started!: () => void;
  const inRound = new Promise<void>((resolve) => (started = resolve));
  const loop = startPollLoop({
    intervalMs: HOUR,
    log,
    what: 'test',
    round: (stopping) =>
      new Promise<boolean>((resolve, reject) => {
        started();
        finish = () => (end === 'resolve' ? resolve(!stopping()) : reject(new Error('connection closed')));
      }),
  });
  await inRound;
  return { loop, end: () => finish(true) };
}

/** 'closed' when close() settles within 2 s, else 'still waiting'. */
function closing(loop: PollLoop): Promise<string> {
  return Promise.race([loop.close().then(() => 'closed'), new Promise<string>((resolve) => setTimeout(resolve, 2000, 'still waiting'))]);
}

test('close() during a round ends the loop when the round ends, not an interval later', async (t) => {
  const { loop, end } = await loopInRound('resolve');
  const closed = closing(loop);
  end();
  t.is(await closed, 'closed');
});

test('a round that fails after close() was called also ends the loop', async (t) => {
  const { loop, end } = await loopInRound('reject');
  const closed = closing(loop);
  end();
  t.is(await closed, 'closed');
});

test('close() while waiting between rounds ends the wait', async (t) => {
  let rounds = 0;
  const loop = startPollLoop({ intervalMs: HOUR, log, what: 'test', round: async () => (rounds++, false) });
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.is(await closing(loop), 'closed');
  t.is(rounds, 1);
});
