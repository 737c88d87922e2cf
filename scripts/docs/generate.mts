// npm run docs:generate: writes each generated section (scripts/docs/sections.mts) into its file.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { GENERATED_FILES, SECTIONS, writeSection } from './sections.mts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
for (const section of SECTIONS) {
  const file = path.join(root, section.file);
  const before = readFileSync(file, 'utf8');
  const after = writeSection(before, section);
  if (after !== before) writeFileSync(file, after);
  console.log(`${section.file}: ${section.name} ${after === before ? 'unchanged' : 'written'}`);
}
for (const generated of GENERATED_FILES) {
  const file = path.join(root, generated.file);
  const before = existsSync(file) ? readFileSync(file, 'utf8') : null;
  const after = generated.render();
  if (after !== before) writeFileSync(file, after);
  console.log(`${generated.file}: ${after === before ? 'unchanged' : 'written'}`);
}
