// Prints the README's configuration table from common/config.ts (npm run -s docs:config).
import { describeConfig } from '../common/config.ts';

console.log('| variable | default | meaning |\n|---|---|---|');
for (const row of describeConfig()) console.log(`| \`${row.env}\` | \`${row.default}\` | ${row.doc} |`);
