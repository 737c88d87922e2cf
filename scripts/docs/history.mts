// Development history has no place in the project: a comment or a document says why things
// are as they are now, and what an earlier version did is in git. These patterns catch the
// usual ways history slips in; each is narrow enough that the present tense passes ("is used to
// store" does, "used to store" does not: write "stores" or "no longer" with what holds now).
// This file is the one place the words may appear.

export interface HistoryPattern {
  pattern: RegExp;
  why: string;
}

export const HISTORY_PATTERNS: readonly HistoryPattern[] = [
  // A diary's session ("in session 12", "sessions of work", "the previous session"), not a login's
  // (an operator's session, its session cookie, sessionsRevoked).
  {
    pattern: /\bsessions?\s+#?\d|\bsessions?\s+of\s+(?:work|development|coding)\b|\b(?:last|previous|earlier|next|work(?:ing)?)\s+sessions?\b/i,
    why: 'a numbered entry of a work diary: say what holds now, or leave the measurement out',
  },
  { pattern: /\b(?:in|during|from|since)\s+(?:this|that|one|an earlier|a later)\s+session\b/i, why: 'a work diary: say what holds now' },
  { pattern: /\b(?:tried|experiments?|prototypes?)\b[^.]{0,60}?\bnot kept\b/i, why: 'an attempt not kept: git has it' },
  { pattern: /\btried and dropped\b/i, why: 'an attempt dropped: git has it' },
  {
    // "used to" after a form of "be" or "get" (with at most one word between) is the passive: allowed.
    pattern: /(?<!\b(?:is|are|was|were|be|been|being|get|gets|got|getting|it's|that's|what's)\s+(?:[a-z]+\s+)?)\bused to\b/i,
    why: 'what the code used to do: say what it does now',
  },
  { pattern: /\bpreviously\b/i, why: 'what was there before: say what holds now' },
  { pattern: /\bearlier versions?\b/i, why: 'an earlier version: git has it' },
  { pattern: /\bformerly\b/i, why: 'what was there before: say what holds now' },
  {
    // "run 3", "run 2's code", "(run 4)"; not a duration or a count ("has run 10 ms", "run 3 files").
    pattern: /\brun \d{1,2}(?=(?:'s)?(?:[,:;)|]|\s+\||\.(?!\d)|\s+(?:is|was|the|of|with|and|gave|showed|had)\b|$))/i,
    why: 'a numbered run: keep one current figure, with its date and machine',
  },
];

export interface HistoryFinding {
  line: number;
  text: string;
  why: string;
}

// A comment's leading marker, left out when a line is read after the one before it.
const CONTINUATION = /^\s*(?:(?:\/\/|#+|--|\*(?!\*)|\/\*\*?)\s*)?/;

/**
 * Each banned phrase of `text`, with its line. A phrase wrapped onto the next line of a
 * paragraph or a comment is still found: each line is read with the end of the one before it
 * (for what precedes "used to") and the next one after it, and a match counts on the line it
 * starts on.
 */
export function findHistory(text: string): HistoryFinding[] {
  const lines = text.split('\n').map((l) => l.replace(/\r$/, ''));
  const found: HistoryFinding[] = [];
  lines.forEach((line, i) => {
    const before = i > 0 ? lines[i - 1].trim().slice(-40) + ' ' : '';
    const own = line.replace(CONTINUATION, (m) => ' '.repeat(m.length));
    const after = i + 1 < lines.length ? ' ' + lines[i + 1].replace(CONTINUATION, '') : '';
    const joined = before + own + after;
    for (const { pattern, why } of HISTORY_PATTERNS) {
      for (const m of joined.matchAll(new RegExp(pattern.source, `${pattern.flags}g`))) {
        if (m.index! < before.length || m.index! >= before.length + own.length) continue;
        found.push({ line: i + 1, text: `"${m[0]}" in: ${line.trim().slice(0, 160)}`, why });
      }
    }
  });
  return found;
}
