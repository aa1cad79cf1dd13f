/**
 * The keys of the chunked layouts' chunks, as the Python reader has them (store/chunks.py,
 * store/keyed_chunks.py): `ipyagent/` and the chunk's number (six digits or more; layouts 2 and
 * 3), or `ipyagent/` and 16 hex digits derived from the entries the chunk holds (layout 4, what
 * this frontend writes: `keyedKey`). Any other key under `ipyagent/` is stray: set aside, never
 * read, never numbered after.
 */

import { METADATA_KEY } from './metadata';

export const CHUNK_PREFIX = `${METADATA_KEY}/`;

/** The one key of each number below 10^9 (the Python readers' CHUNK_LIMIT, store/chunks.py): six digits, or seven to nine without a leading
 * zero. Any other key under `ipyagent/` (`ipyagent/` and 17 digits, beyond a double's precision;
 * 400 digits, `Infinity` as a number) is stray: set aside, never read, never numbered after. */
const CHUNK_KEY = /^ipyagent\/([0-9]{6}|[1-9][0-9]{6,8})$/;
/** A key of layout 4: `ipyagent/` and 16 lowercase hex digits. */
const KEYED_KEY = /^ipyagent\/[0-9a-f]{16}$/;

export const STRAY_REASON =
  'not a chunk key (ipyagent/ and a number below 10^9 in six digits or more, no other leading zero, or ' +
  'ipyagent/ and 16 hex digits): not read, and no chunk is numbered after it';

/** FNV-1a, 64 bits, of `bytes`, as 16 hex digits (store/keyed_chunks.py `fnv1a64`). In two
 * 32-bit halves: the prime is 2^40 + 0x1b3, so h * prime = h * 0x1b3 + (h << 40), and every
 * product stays below 2^53, where a double is exact. */
export function fnv1a64(bytes: Uint8Array): string {
  let hi = 0xcbf29ce4;
  let lo = 0x84222325;
  for (const byte of bytes) {
    lo = (lo ^ byte) >>> 0;
    const low = lo * 0x1b3;
    hi = (hi * 0x1b3 + Math.floor(low / 0x100000000) + ((lo << 8) >>> 0)) >>> 0;
    lo = low >>> 0;
  }
  return hi.toString(16).padStart(8, '0') + lo.toString(16).padStart(8, '0');
}

/** The layout-4 key of a chunk of `session` holding entries with `ids`, in order: FNV-1a 64 of
 * the UTF-8 text of the name and the ids, a line each (`salt` > 0, `"\n#salt"` after them, only
 * when that key holds another chunk already). */
export function keyedKey(session: string, ids: string[], salt = 0): string {
  let text = [session, ...ids].join('\n');
  if (salt) {
    text += `\n#${salt}`;
  }
  return CHUNK_PREFIX + fnv1a64(new TextEncoder().encode(text));
}

/** Whether `key` is a layout-4 chunk key. */
export function isKeyedKey(key: string): boolean {
  return KEYED_KEY.test(key);
}

export function chunkKey(n: number): string {
  return CHUNK_PREFIX + String(n).padStart(6, '0');
}

/** The chunk's number, or null when `key` is no chunk key. */
export function chunkNumber(key: string): number | null {
  const m = CHUNK_KEY.exec(key);
  return m ? Number(m[1]) : null;
}

/** A key under `ipyagent/` that is no chunk key. */
export function isStrayKey(key: string): boolean {
  return key.startsWith(CHUNK_PREFIX) && chunkNumber(key) === null && !isKeyedKey(key);
}

/** The numbered chunk keys among `keys` with their numbers, the keyed ones (both in the order
 * given), and the stray keys. */
export function classifyKeys(keys: Iterable<string>): {
  chunks: [number, string][];
  keyed: string[];
  strays: string[];
} {
  const chunks: [number, string][] = [];
  const keyed: string[] = [];
  const strays: string[] = [];
  for (const k of keys) {
    const n = chunkNumber(k);
    if (n !== null) {
      chunks.push([n, k]);
    } else if (isKeyedKey(k)) {
      keyed.push(k);
    } else if (isStrayKey(k)) {
      strays.push(k);
    }
  }
  return { chunks, keyed, strays };
}

/** A warning about stray keys (null when there are none). */
export function strayNotice(keys: string[]): string | null {
  if (!keys.length) {
    return null;
  }
  const shown = keys.slice(0, 3).map(k => (k.length > 40 ? `${k.slice(0, 40)}…` : k));
  return (
    `ipyagent: ${keys.length} key(s) of this notebook's metadata under "${CHUNK_PREFIX}" are not chunk keys ` +
    `(${shown.join(', ')}${keys.length > 3 ? ', …' : ''}): they are set aside, not read, and no chunk is ` +
    'numbered after them.'
  );
}
