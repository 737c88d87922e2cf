// Who may see personal data on the live pages (user and anonymous IDs, the error texts of dead
// letters, which quote the refused event): a viewer who signed in. Without DASHBOARD_PASSWORD
// nobody is signed in, so the pages show counts, names and states but no identifiers, as
// bull-board then hides job data (gateway/dashboard.ts): one rule for the whole dashboard. Its
// other rules (basic auth when a password is set, read-only unless DASHBOARD_READ_ONLY=false)
// apply to these pages as to bull-board. Once operators exist, the operator's role decides.
import type { Config } from '../../platform/config.ts';

/**
 * With DASHBOARD_PASSWORD set, every request that reaches a page passed basic auth. Once operators
 * exist, a request reaches a page with an operator's session (gateway/console/auth.ts): an admin
 * sees personal data, a read-only operator never does.
 */
export function seesPersonalData(config: Pick<Config, 'dashboardPassword'>, viewer: { operator?: { role: string } } = {}): boolean {
  if (viewer.operator) return viewer.operator.role === 'admin';
  return Boolean(config.dashboardPassword);
}

/**
 * A form POST that a page of another site could make the browser send (basic-auth credentials
 * go along by themselves): refused unless the browser says it comes from this origin.
 */
export function sameOrigin(headers: { origin?: string; 'sec-fetch-site'?: string; host?: string }): boolean {
  const site = headers['sec-fetch-site'];
  if (site !== undefined) return site === 'same-origin';
  if (headers.origin === undefined) return false;
  try {
    return new URL(headers.origin).host === headers.host;
  } catch {
    return false;
  }
}
