// Reading the Prometheus text format in tests.

/** `name{labels} value` lines of the Prometheus text format, labels as written. */
export function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(\{.*\})? (\S+)$/.exec(line);
    if (m) out.set(m[1] + (m[2] ?? ''), Number(m[3]));
  }
  return out;
}

/** The key `samples` uses for a series: `name{a="1",b="2"}`, labels in the order given. */
export const series = (name: string, labels: Record<string, string | number> = {}) => {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  return parts.length ? `${name}{${parts.join(',')}}` : name;
};
