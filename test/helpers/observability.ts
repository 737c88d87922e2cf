// The observability pack's files (deploy/observability/) as the tests read them: every PromQL
// expression of the Grafana dashboard and of the alert rules, the metric names they use, and the
// shipped Prometheus configuration pointed at this machine's processes.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const OBSERVABILITY = path.join(root, 'deploy/observability');
export const PROMETHEUS_CONFIG = path.join(OBSERVABILITY, 'prometheus/prometheus.yml');
export const ALERT_RULES = path.join(OBSERVABILITY, 'prometheus/alerts.yml');
export const DASHBOARD = path.join(OBSERVABILITY, 'grafana/dashboards/intake.json');
export const DATASOURCES = path.join(OBSERVABILITY, 'grafana/provisioning/datasources/prometheus.yml');
export const DASHBOARD_PROVIDERS = path.join(OBSERVABILITY, 'grafana/provisioning/dashboards/intake.yml');

export interface Expression {
  /** Where it comes from: a panel's title and query, or an alert's name. */
  source: string;
  expr: string;
}

export interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { type: string; uid: string };
  targets?: { refId: string; expr: string; datasource?: { type: string; uid: string } }[];
  gridPos: { h: number; w: number; x: number; y: number };
  panels?: Panel[];
}

export const readYaml = (file: string) => parse(readFileSync(file, 'utf8'));
export const readDashboard = (): { uid: string; title: string; panels: Panel[] } => JSON.parse(readFileSync(DASHBOARD, 'utf8'));

/** Every panel, those nested in collapsed rows included. */
export function allPanels(panels: Panel[]): Panel[] {
  return panels.flatMap((p) => [p, ...allPanels(p.panels ?? [])]);
}

export function dashboardExpressions(): Expression[] {
  return allPanels(readDashboard().panels).flatMap((panel) =>
    (panel.targets ?? []).map((target) => ({ source: `panel "${panel.title}" ${target.refId}`, expr: target.expr })),
  );
}

export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export function alertRules(): AlertRule[] {
  return (readYaml(ALERT_RULES).groups as { rules: AlertRule[] }[]).flatMap((g) => g.rules);
}

export function alertExpressions(): Expression[] {
  return alertRules().map((rule) => ({ source: `alert ${rule.alert}`, expr: rule.expr }));
}

/**
 * Grafana's built-in interval variables, as Grafana would fill them in for a short range: the
 * dashboard uses no other variables (a test checks that).
 */
export function withGrafanaVariables(expr: string, interval: string): string {
  return expr.replaceAll('$__rate_interval', interval).replaceAll('$__interval', interval);
}

const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'inf', 'nan']);

/** The metric names an expression selects: identifiers outside strings, label matchers, ranges and groupings that are neither functions nor keywords. */
export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const m of bare.matchAll(/[a-zA-Z_:][\w:]*/g)) {
    const before = bare[m.index - 1] ?? ' ';
    if (/[\d.]/.test(before)) continue; // a number's exponent or a duration's unit
    if (KEYWORDS.has(m[0].toLowerCase())) continue;
    if (
      bare
        .slice(m.index + m[0].length)
        .trimStart()
        .startsWith('(')
    )
      continue; // a function or an aggregation
    names.add(m[0]);
  }
  return [...names];
}

/**
 * The expression with `bool` after each comparison (outside label matchers and strings): an
 * alert's condition then yields its 0/1 verdict for every series it compares instead of
 * filtering them all out, so a healthy system still shows that the expression finds its data.
 */
export function asVerdicts(expr: string): string {
  let out = '';
  let braces = 0;
  let quote: string | null = null;
  for (let i = 0; i < expr.length; i++) {
    const c = expr[i];
    if (quote) {
      out += c;
      if (c === '\\') out += expr[++i] ?? '';
      else if (c === quote) quote = null;
      continue;
    }
    if (c === '"' || c === "'") quote = c;
    else if (c === '{') braces++;
    else if (c === '}') braces--;
    const op = braces === 0 ? /^(==|!=|>=|<=|>|<)/.exec(expr.slice(i))?.[1] : undefined;
    if (op === undefined) {
      out += c;
      continue;
    }
    out += op;
    i += op.length - 1;
    if (!/^\s*bool\b/.test(expr.slice(i + 1))) out += ' bool';
  }
  return out;
}

/** Metric names in Prometheus text format (histograms' _bucket, _sum and _count lines as written). */
export function exposedNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)[{ ]/.exec(line);
    if (m) names.add(m[1]);
  }
  return names;
}

/**
 * The shipped prometheus.yml scraping the given targets instead of the compose services (only
 * each job's service discovery is replaced: its relabelling, the rules and the rest stay), at
 * `interval`, with the shipped alert rules by absolute path.
 */
export function prometheusConfigFor(targets: Record<string, string[]>, interval: string): Record<string, any> {
  const config = readYaml(PROMETHEUS_CONFIG);
  config.global = { ...config.global, scrape_interval: interval, evaluation_interval: interval };
  config.rule_files = (config.rule_files as string[]).map((file) => path.resolve(path.dirname(PROMETHEUS_CONFIG), file));
  for (const job of config.scrape_configs as Record<string, any>[]) {
    const jobTargets = targets[job.job_name];
    if (!jobTargets) throw new Error(`no test target for scrape job ${job.job_name}`);
    delete job.dns_sd_configs;
    job.static_configs = [{ targets: jobTargets }];
  }
  return config;
}
