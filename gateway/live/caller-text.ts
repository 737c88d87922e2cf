// Characters of caller text that the live view never writes as themselves. A caller chooses every
// character of a messageId, a user ID, an event or a trait name: a right-to-left override
// (U+202E) would turn the rest of its line around on screen, an isolate or mark would move its
// neighbours, C0 and C1 controls (NUL among them) have no place in HTML and show as nothing or as
// boxes, and an unpaired surrogate would leave as U+FFFD. Each is written instead as the escape
// a JSON string would use (`\u202E`), so the viewer sees that it is there and which it is.

/** C0, DEL, C1, the bidi controls (ALM, LRM, RLM, LRE…RLO, LRI…PDI) and unpaired surrogates. */
const UNSHOWABLE =
  /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** `\u202E` for U+202E: what the live view shows in place of an unshowable character. */
export function escapeCode(char: string): string {
  return `\\u${char.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`;
}

/** `text` with every unshowable character given to `replace` (by default, its escape). */
export function replaceUnshowable(text: string, replace: (char: string) => string = escapeCode): string {
  return text.replace(UNSHOWABLE, replace);
}

/** How many characters of one caller value a page shows; the rest is cut off with an ellipsis. */
export const SHOWN_CHARS = 256;
