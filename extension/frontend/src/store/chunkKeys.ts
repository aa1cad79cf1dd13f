/**
 * The keys of the chunked layouts' chunks: `ipyagent/` and the chunk's number (six digits or
 * more), as the Python reader has them (store/chunks.py). Any other key under `ipyagent/` is
 * stray: set aside, never read, never numbered after.
 */

import { METADATA_KEY } from './metadata';

export const CHUNK_PREFIX = `${METADATA_KEY}/`;

/** Chunk numbers are below this, here and in the Python readers (store/chunks.py). */
export const CHUNK_LIMIT = 1e9;

/** The one key of each number below CHUNK_LIMIT: six digits, or seven to nine without a leading
 * zero. Any other key under `ipyagent/` (`ipyagent/` and 17 digits, beyond a double's precision;
 * 400 digits, `Infinity` as a number) is stray: set aside, never read, never numbered after. */
const CHUNK_KEY = /^ipyagent\/([0-9]{6}|[1-9][0-9]{6,8})$/;

export const STRAY_REASON =
  'not a chunk key (ipyagent/ and a number below 10^9 in six digits or more, no other leading zero): ' +
  'not read, and no chunk is numbered after it';

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
  return key.startsWith(CHUNK_PREFIX) && chunkNumber(key) === null;
}

/** The chunk keys among `keys` with their numbers (in the order given), and the stray keys. */
export function classifyKeys(keys: Iterable<string>): { chunks: [number, string][]; strays: string[] } {
  const chunks: [number, string][] = [];
  const strays: string[] = [];
  for (const k of keys) {
    const n = chunkNumber(k);
    if (n !== null) {
      chunks.push([n, k]);
    } else if (isStrayKey(k)) {
      strays.push(k);
    }
  }
  return { chunks, strays };
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
