// Who sees personal data on the console's pages (user and anonymous IDs, payloads, traits,
// addresses, refusals that quote an event). One rule with the live view and the admin API:
//
// - once an operator exists every request carries a session (gateway/console/auth.ts): an admin
//   sees personal data, a read-only operator does not (the admin API refuses it an export too);
// - with no operator, the dashboard is what it was: a viewer who passed DASHBOARD_PASSWORD's
//   basic auth sees it (gateway/live/access.ts), and on a dashboard without a password nobody does.
import type Koa from 'koa';
import type { Config } from '../../../platform/config.ts';
import { seesPersonalData } from '../../live/access.ts';
import type { ConsoleState } from '../auth.ts';

export function showsPersonalData(ctx: Koa.Context, config: Pick<Config, 'dashboardPassword'>): boolean {
  const operator = (ctx.state as ConsoleState).operator;
  if (operator) return operator.role === 'admin';
  return seesPersonalData(config);
}

/** Why the page hides personal data, for its note. */
export function hiddenWhy(ctx: Koa.Context): string {
  return (ctx.state as ConsoleState).operator
    ? 'a read-only operator sees no personal data: an admin does'
    : 'sign in to see personal data (DASHBOARD_PASSWORD, or an operator: intake operator add)';
}
