// Types of sources.js (plain JavaScript: it runs before any TypeScript loader is there).
export const SOURCE_DIRS: string[];
export const SOURCE_FILES: string[];
export const STAMP_FILE: string;
export function sourceDigest(root: string): string;
export function readStamp(distDir: string): { digest: string; builtAt?: string } | null;
export class ChoiceError extends Error {}
export function chooseCode(root: string, options?: { run?: string; dist?: string }): { kind: 'sources' | 'dist'; entry: string };
