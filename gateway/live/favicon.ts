// The dashboard's icon: an arrow into a tray on the live view's blue. Drawn once from the shapes
// below, as SVG (browsers that take one) and as a 32×32 PNG inside an ICO (/favicon.ico, which
// browsers and bookmarks ask for by name), so the two cannot drift apart and no binary file is kept.
import { crc32, deflateSync } from 'node:zlib';

type Shape = { fill: string } & ({ rect: [x: number, y: number, w: number, h: number]; r?: number } | { polygon: [number, number][] });

const SIZE = 32;
const SHAPES: Shape[] = [
  { fill: '#2f6fde', rect: [0, 0, 32, 32], r: 7 },
  { fill: '#ffffff', rect: [13.5, 5, 5, 10] },
  {
    fill: '#ffffff',
    polygon: [
      [8, 14],
      [24, 14],
      [16, 22],
    ],
  },
  { fill: '#ffffff', rect: [6.5, 19, 3, 8] },
  { fill: '#ffffff', rect: [22.5, 19, 3, 8] },
  { fill: '#ffffff', rect: [6.5, 24, 19, 3] },
];

export const FAVICON_SVG =
  `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${SIZE} ${SIZE}">` +
  SHAPES.map((s) =>
    'rect' in s
      ? `<rect x="${s.rect[0]}" y="${s.rect[1]}" width="${s.rect[2]}" height="${s.rect[3]}"${s.r ? ` rx="${s.r}"` : ''} fill="${s.fill}"/>`
      : `<path d="M${s.polygon.map(([x, y]) => `${x} ${y}`).join('L')}Z" fill="${s.fill}"/>`,
  ).join('') +
  '</svg>';

function inside(shape: Shape, x: number, y: number): boolean {
  if ('polygon' in shape) {
    // Even-odd crossing test.
    let hit = false;
    const p = shape.polygon;
    for (let i = 0, j = p.length - 1; i < p.length; j = i++) {
      const [xi, yi] = p[i];
      const [xj, yj] = p[j];
      if (yi > y !== yj > y && x < ((xj - xi) * (y - yi)) / (yj - yi) + xi) hit = !hit;
    }
    return hit;
  }
  const [rx, ry, w, h] = shape.rect;
  if (x < rx || y < ry || x > rx + w || y > ry + h) return false;
  const r = shape.r ?? 0;
  // Outside a rounded corner: farther than r from the corner's centre.
  const cx = Math.min(Math.max(x, rx + r), rx + w - r);
  const cy = Math.min(Math.max(y, ry + r), ry + h - r);
  return (x - cx) ** 2 + (y - cy) ** 2 <= r * r;
}

/** RGBA pixels of the shapes, 4×4 samples a pixel for smooth edges. */
function raster(): Buffer {
  const n = 4;
  const pixels = Buffer.alloc(SIZE * SIZE * 4);
  const rgb = (hex: string) => [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
  for (let py = 0; py < SIZE; py++) {
    for (let px = 0; px < SIZE; px++) {
      const sum = [0, 0, 0, 0];
      for (let sy = 0; sy < n; sy++) {
        for (let sx = 0; sx < n; sx++) {
          const x = px + (sx + 0.5) / n;
          const y = py + (sy + 0.5) / n;
          const top = SHAPES.findLast((s) => inside(s, x, y));
          if (!top) continue;
          const [r, g, b] = rgb(top.fill);
          sum[0] += r;
          sum[1] += g;
          sum[2] += b;
          sum[3] += 1;
        }
      }
      const at = (py * SIZE + px) * 4;
      if (sum[3]) for (let c = 0; c < 3; c++) pixels[at + c] = Math.round(sum[c] / sum[3]);
      pixels[at + 3] = Math.round((255 * sum[3]) / (n * n));
    }
  }
  return pixels;
}

function png(pixels: Buffer): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const head = Buffer.alloc(8);
    head.writeUInt32BE(data.length, 0);
    head.write(type, 4, 'latin1');
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
    return Buffer.concat([head, data, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(SIZE, 0);
  header.writeUInt32BE(SIZE, 4);
  header.set([8, 6, 0, 0, 0], 8); // 8 bits a channel, RGBA, no interlace
  const rows: Buffer[] = [];
  for (let y = 0; y < SIZE; y++) rows.push(Buffer.from([0]), pixels.subarray(y * SIZE * 4, (y + 1) * SIZE * 4));
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(Buffer.concat(rows))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** An ICO holding one PNG image (every browser since 2009 reads PNG inside ICO). */
function ico(image: Buffer): Buffer {
  const head = Buffer.alloc(22);
  head.writeUInt16LE(0, 0);
  head.writeUInt16LE(1, 2); // icon
  head.writeUInt16LE(1, 4); // one image
  head.set([SIZE, SIZE, 0, 0], 6);
  head.writeUInt16LE(1, 10); // colour planes
  head.writeUInt16LE(32, 12); // bits a pixel
  head.writeUInt32LE(image.length, 14);
  head.writeUInt32LE(22, 18);
  return Buffer.concat([head, image]);
}

export const FAVICON_PNG = png(raster());
export const FAVICON_ICO = ico(FAVICON_PNG);

/** Where the page links point; /favicon.ico is where browsers look without one. */
export const ICONS = new Map<string, { type: string; body: Buffer | string }>([
  ['/favicon.ico', { type: 'image/x-icon', body: FAVICON_ICO }],
  ['/favicon.svg', { type: 'image/svg+xml', body: FAVICON_SVG }],
  ['/favicon.png', { type: 'image/png', body: FAVICON_PNG }],
]);

/** The <link>s of a page of ours (bull-board's page gets the same through its uiConfig.favIcon). */
export const ICON_LINKS = '<link rel="icon" type="image/svg+xml" href="/favicon.svg"><link rel="alternate icon" type="image/png" href="/favicon.png">';
